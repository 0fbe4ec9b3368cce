#include "methods/fedmitr/ensemble_head.h"

#include "methods/fedmitr/vit_head.h"
#include "methods/heads/head_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <istream>
#include <ostream>

namespace fednode {
namespace {

std::string real_literal(double v) {  // a TorchScript float literal that reads back as `v`
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  std::string s = text;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

EnsembleHead::EnsembleHead(std::vector<VitModel> models, EnsembleMix mix) : models_(std::move(models)), mix_(std::move(mix)) {
  if (models_.empty()) throw InputError("ViT ensemble head: no model");
  if (mix_.samples.size() != models_.size())
    throw InputError("ViT ensemble head: " + std::to_string(mix_.samples.size()) + " image counts for " +
                     std::to_string(models_.size()) + " models");
  for (size_t i = 0; i < models_.size(); ++i) {
    const std::string where = "ViT ensemble head, model " + std::to_string(i);
    models_[i].spec.validate(where);
    if (!(models_[i].spec == models_[0].spec)) throw InputError(where + ": not the spec of model 0");
    if (static_cast<int64_t>(models_[i].parameters.size()) != models_[i].spec.parameter_count())
      throw InputError(where + ": " + std::to_string(models_[i].parameters.size()) + " parameters for a spec of " +
                       std::to_string(models_[i].spec.parameter_count()));
  }
  EnsembleMix counted = mix_;
  counted.rule = EnsembleRule::WeightedProbabilities;  // every rule keeps the counts, and they must be counts
  counted.shares(models_.size());
}

MatrixF EnsembleHead::scores(const MatrixF& X) const {
  // In blocks, as VitHead: one block's attention maps per model at a time.
  constexpr Eigen::Index kBlock = 1024;
  MatrixF out(X.rows(), num_classes());
  for (Eigen::Index first = 0; first < X.rows(); first += kBlock) {
    const Eigen::Index n = std::min(kBlock, X.rows() - first);
    out.middleRows(first, n) = ensemble_logits(models_, X.middleRows(first, n), mix_);
  }
  return out;
}

ScriptPart EnsembleHead::script() const {
  ScriptPart out;
  std::string terms;
  const std::vector<double> shares = mix_.shares(models_.size());
  for (size_t i = 0; i < models_.size(); ++i) {
    const std::string name = "member" + std::to_string(i);
    ScriptPart one = vit_script_part(models_[i], name, "head_m" + std::to_string(i) + "_p");
    out.code += one.code;
    for (ScriptTensor& t : one.tensors) out.tensors.push_back(std::move(t));
    if (i) terms += ", ";
    // As ensemble_logits: the share-weighted logits, or log sum_k share_k softmax_k in log space.
    terms += mix_.probabilities() ? "torch.log_softmax(self." + name + "(x), 1) + " + real_literal(std::log(shares[i]))
                                  : "self." + name + "(x) * " + real_literal(shares[i]);
  }
  out.code += "def head(self, x: Tensor) -> Tensor:\n";
  out.code += mix_.probabilities() ? "    return torch.logsumexp(torch.stack([" + terms + "], 0), 0)\n"
                                   : "    return torch.sum(torch.stack([" + terms + "], 0), 0)\n";
  return out;
}

std::string EnsembleHead::composition() const {
  std::string images;
  for (size_t i = 0; i < mix_.samples.size(); ++i)
    images += (i ? ", " : "") + std::to_string(static_cast<long long>(std::llround(mix_.samples[i])));
  const std::string n = std::to_string(models_.size());
  return n + " ViTs (" + std::to_string(models_.front().parameters.size()) + " parameters each) mixed as " +
         to_string(mix_.rule) + ", trained on " + images + " images: " + n + " forward passes per image";
}

void EnsembleHead::save_body(std::ostream& out) const {
  head_format::write_u64(out, mix_.probabilities() ? 1 : 0);
  head_format::write_u64(out, models_.size());
  MatrixF counts(1, static_cast<Eigen::Index>(models_.size()));
  for (size_t i = 0; i < models_.size(); ++i) counts(0, static_cast<Eigen::Index>(i)) = static_cast<float>(mix_.samples[i]);
  head_format::write_matrix(out, counts);
  for (const VitModel& m : models_) write_vit_model(out, m);
}

std::unique_ptr<Head> load_ensemble_head(std::istream& in, const std::string& where) {
  const uint64_t rule = head_format::read_u64(in, where);
  if (rule > 1) throw InputError(where + ": ensemble rule " + std::to_string(rule) + " (0: mean-logits, 1: weighted-probabilities)");
  const uint64_t n = head_format::read_u64(in, where);
  if (n < 1 || n > kMaxEnsembleModels)
    throw InputError(where + ": " + std::to_string(n) + " models in an ensemble head (1 to " +
                     std::to_string(kMaxEnsembleModels) + ")");
  const MatrixF counts = head_format::read_matrix(in, where);
  if (counts.rows() != 1 || static_cast<uint64_t>(counts.cols()) != n)
    throw InputError(where + ": " + std::to_string(counts.size()) + " image counts for " + std::to_string(n) + " models");
  EnsembleMix mix;
  mix.rule = rule == 1 ? EnsembleRule::WeightedProbabilities : EnsembleRule::MeanLogits;
  std::vector<VitModel> models;
  for (uint64_t i = 0; i < n; ++i) {
    mix.samples.push_back(counts(0, static_cast<Eigen::Index>(i)));
    models.push_back(read_vit_model(in, where + ", model " + std::to_string(i)));
  }
  return std::make_unique<EnsembleHead>(std::move(models), std::move(mix));
}

}  // namespace fednode
