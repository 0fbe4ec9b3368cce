#include "methods/fedmitr/vit.h"

#include "core/digest.h"
#include "core/rng.h"
#include "methods/blas_threads.h"
#include "methods/fedmitr/vit_torch.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

namespace fednode {

int64_t VitSpec::parameter_count() const {
  if (scripted()) return script_parameters;
  const int64_t d = dim, m = mlp_dim, T = tokens();
  const int64_t per_block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + (m * d + m) + (d * m + d);
  return (d * channels * patch * patch + d) + d + (T + 1) * d + depth * per_block + 2 * d + (int64_t{classes} * d + classes);
}

void VitSpec::validate(const std::string& where) const {
  auto positive = [&](const char* name, int v, int most) {
    if (v < 1 || v > most)
      throw InputError(where + ": " + name + " must lie in [1, " + std::to_string(most) + "], got " + std::to_string(v));
  };
  positive("image_size", image_size, 4096);
  positive("channels", channels, 16);
  positive("patch", patch, image_size);
  if (scripted()) {
    if (script.size() != 64 || !std::all_of(script.begin(), script.end(), [](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        }))
      throw InputError(where + ": script must be a SHA-256 as 64 lowercase hex digits");
    if (dim != 0 || depth != 0 || heads != 0 || mlp_dim != 0)
      throw InputError(where + ": a scripted ViT has dim, depth, heads and mlp_dim 0");
    positive("classes", classes, 1 << 16);
    if (image_size % patch != 0)
      throw InputError(where + ": patch " + std::to_string(patch) + " does not divide image_size " + std::to_string(image_size));
    if (tokens() > 65536) throw InputError(where + ": " + std::to_string(tokens()) + " patch tokens, at most 65536");
    if (script_parameters < 1 || script_parameters > kMaxVitParameters)
      throw InputError(where + ": " + std::to_string(script_parameters) + " parameters, expected 1 to " +
                       std::to_string(kMaxVitParameters));
    return;
  }
  positive("dim", dim, 1 << 14);
  positive("depth", depth, 256);
  positive("heads", heads, dim);
  positive("mlp_dim", mlp_dim, 1 << 16);
  positive("classes", classes, 1 << 16);
  if (image_size % patch != 0)
    throw InputError(where + ": patch " + std::to_string(patch) + " does not divide image_size " + std::to_string(image_size));
  if (dim % heads != 0)
    throw InputError(where + ": dim " + std::to_string(dim) + " is not a multiple of heads " + std::to_string(heads));
  if (tokens() > 65536) throw InputError(where + ": " + std::to_string(tokens()) + " patch tokens, at most 65536");
  if (parameter_count() > kMaxVitParameters)
    throw InputError(where + ": " + std::to_string(parameter_count()) + " parameters, at most " +
                     std::to_string(kMaxVitParameters));
}

bool operator==(const VitSpec& a, const VitSpec& b) {
  return a.image_size == b.image_size && a.channels == b.channels && a.patch == b.patch && a.dim == b.dim &&
         a.depth == b.depth && a.heads == b.heads && a.mlp_dim == b.mlp_dim && a.classes == b.classes &&
         a.script == b.script && a.script_parameters == b.script_parameters;
}

namespace {

// Appends to the flat vector in the layout of vit.h.
class Filler {
 public:
  Filler(std::vector<float>& p, Rng& rng) : p_(p), rng_(rng) {}
  // A Linear layer as PyTorch starts it (kaiming-uniform with a = sqrt(5) for the weights, which
  // is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for the biases).
  void linear(int64_t out, int64_t fan_in) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    uniform(out * fan_in, bound);
    uniform(out, bound);
  }
  void normal(int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      double v;
      do v = rng_.normal();
      while (v < -2.0 || v > 2.0);  // truncated at two standard deviations
      p_.push_back(static_cast<float>(0.02 * v));
    }
  }
  void constant(int64_t n, float v) { p_.insert(p_.end(), static_cast<size_t>(n), v); }

 private:
  void uniform(int64_t n, double bound) {
    for (int64_t i = 0; i < n; ++i) p_.push_back(static_cast<float>(bound * (2.0 * rng_.uniform() - 1.0)));
  }

  std::vector<float>& p_;
  Rng& rng_;
};

}  // namespace

VitModel vit_init(const VitSpec& spec, uint64_t seed) {
  spec.validate("ViT spec");
  if (spec.scripted()) {
    VitModel m;
    m.spec = spec;
    torch_function<decltype(fednode_torch_vit_script_start)>("fednode_torch_vit_script_start")(spec.script, &m.parameters);
    return m;
  }
  VitModel m;
  m.spec = spec;
  m.parameters.reserve(static_cast<size_t>(spec.parameter_count()));
  Rng rng = Rng::stream(seed, Purpose::ModelInit);
  Filler f(m.parameters, rng);
  const int64_t d = spec.dim, mlp = spec.mlp_dim;
  f.linear(d, int64_t{spec.channels} * spec.patch * spec.patch);  // patch embedding
  f.normal(d);                          // CLS
  f.normal((spec.tokens() + 1) * d);    // positions
  for (int b = 0; b < spec.depth; ++b) {
    f.constant(d, 1), f.constant(d, 0);  // LayerNorm 1
    f.linear(3 * d, d);                  // qkv
    f.linear(d, d);                      // the attention's output
    f.constant(d, 1), f.constant(d, 0);  // LayerNorm 2
    f.linear(mlp, d);
    f.linear(d, mlp);
  }
  f.constant(d, 1), f.constant(d, 0);    // final LayerNorm
  f.linear(spec.classes, d);             // head
  return m;
}

namespace {

// Every call into LibTorch below runs OpenBLAS single-threaded (methods/blas_threads.h): the
// ViT's matmuls go to OpenBLAS from inside LibTorch's OpenMP team, and the two pools on the same
// cores took them from each other. Measured with PyTorch 1.13 on this project's 2 cores, 4 steps
// of inverting 128 images against 10 models and a student: 10.0 s with both pools at 2 threads,
// 5.3 s with OpenBLAS at 1 (and the bits no longer depend on the core count).
void check_model(const VitModel& model, const MatrixF& images) {
  const VitSpec& s = model.spec;
  s.validate("ViT spec");
  if (static_cast<int64_t>(model.parameters.size()) != s.parameter_count())
    throw InputError("ViT: " + std::to_string(model.parameters.size()) + " parameters for a spec of " +
                     std::to_string(s.parameter_count()));
  if (images.cols() != s.pixels())
    throw InputError("ViT: images of " + std::to_string(images.cols()) + " values, the spec takes " +
                     std::to_string(s.channels) + " x " + std::to_string(s.image_size) + " x " +
                     std::to_string(s.image_size) + " = " + std::to_string(s.pixels()));
}

}  // namespace

VitSpec load_vit_script(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw InputError("ViT script " + path + ": no such file");
  const std::string digest = sha256_file_hex(path);
  VitSpec spec;
  const BlasSingleThread single;  // OpenBLAS beside LibTorch: see above check_model
  torch_function<decltype(fednode_torch_vit_load_script)>("fednode_torch_vit_load_script")(path, digest, &spec);
  spec.validate("ViT script " + path);
  return spec;
}

std::string vit_script_file(const VitModel& model) {
  model.spec.validate("ViT script");
  std::string bytes;
  torch_function<decltype(fednode_torch_vit_write_script)>("fednode_torch_vit_write_script")(model, &bytes);
  return bytes;
}

namespace {

VitOutput forward_checked(const VitModel& model, const MatrixF& images, const std::vector<uint8_t>& keep,
                          bool drop_stopped, bool token_logits) {
  const VitSpec& s = model.spec;
  check_model(model, images);
  if (!keep.empty()) {
    const int64_t T = s.tokens();
    if (static_cast<int64_t>(keep.size()) != images.rows() * T)
      throw InputError("ViT: a keep-mask of " + std::to_string(keep.size()) + " flags for " +
                       std::to_string(images.rows()) + " images of " + std::to_string(T) + " patches");
    for (int64_t b = 0; b < images.rows(); ++b)
      if (std::none_of(keep.begin() + b * T, keep.begin() + (b + 1) * T, [](uint8_t k) { return k != 0; }))
        throw InputError("ViT: the keep-mask drops every patch of image " + std::to_string(b));
    if (drop_stopped)
      for (int64_t b = 1; b < images.rows(); ++b)
        if (std::count(keep.begin() + b * T, keep.begin() + (b + 1) * T, 0) != std::count(keep.begin(), keep.begin() + T, 0))
          throw InputError("ViT: to drop stopped patches every image must keep as many as image 0; image " +
                           std::to_string(b) + " does not");
  }
  VitOutput out;
  if (images.rows() == 0) {
    out.logits.resize(0, s.classes);
    out.token_logits.resize(0, s.classes);
    out.cls_attention.resize(0, s.tokens());
    return out;
  }
  const BlasSingleThread single;  // OpenBLAS beside LibTorch: see above check_model
  torch_function<decltype(fednode_torch_vit_forward)>("fednode_torch_vit_forward")(model, images, keep, drop_stopped,
                                                                                   token_logits, &out);
  return out;
}

}  // namespace

VitOutput vit_forward(const VitModel& model, const MatrixF& images, const std::vector<uint8_t>& keep, bool drop_stopped) {
  return forward_checked(model, images, keep, drop_stopped, /*token_logits=*/true);
}

VitOutput vit_class_scores(const VitModel& model, const MatrixF& images) {
  return forward_checked(model, images, {}, false, /*token_logits=*/false);
}

int VitTrainOptions::epochs_for(int64_t n) const {
  if (n <= 0 || epochs == 0) return epochs;
  const int64_t per_epoch = (n + batch_size - 1) / batch_size;
  return static_cast<int>(std::max<int64_t>(epochs, std::min<int64_t>((min_steps + per_epoch - 1) / per_epoch, 1 << 20)));
}

VitModel vit_train(const VitModel& start, const MatrixF& images, const Labels& labels, const VitTrainOptions& o) {
  check_model(start, images);
  if (static_cast<Eigen::Index>(labels.size()) != images.rows())
    throw InputError("ViT training: " + std::to_string(labels.size()) + " labels for " + std::to_string(images.rows()) +
                     " images");
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= start.spec.classes)
      throw InputError("ViT training: label " + std::to_string(labels[i]) + " of image " + std::to_string(i) +
                       " is outside [0, " + std::to_string(start.spec.classes) + ")");
  if (o.epochs < 0 || o.min_steps < 0 || o.batch_size < 1 || !(o.lr > 0) || !(o.momentum >= 0) || !(o.weight_decay >= 0))
    throw InputError("ViT training: epochs and min_steps must be >= 0, the batch size >= 1, the learning rate > 0, "
                     "momentum and weight decay >= 0");
  if (images.rows() == 0 || o.epochs == 0) return start;
  VitModel out;
  const BlasSingleThread single;  // OpenBLAS beside LibTorch: see above check_model
  torch_function<decltype(fednode_torch_vit_train)>("fednode_torch_vit_train")(start, images, labels, o, &out);
  return out;
}

Inversion vit_invert(const std::vector<VitModel>& ensemble, const VitModel* student, const Labels& targets,
                     const InversionOptions& o, const EnsembleMix& mix) {
  if (ensemble.empty()) throw InputError("ViT inversion: no model to invert");
  const std::vector<double> shares = mix.shares(ensemble.size());
  const VitSpec& s = ensemble[0].spec;
  MatrixF noise(static_cast<Eigen::Index>(targets.size()), s.pixels());
  for (const VitModel& m : ensemble) {
    if (!(m.spec == s)) throw InputError("ViT inversion: the ensemble's models have different specs");
    check_model(m, noise);
  }
  if (student) {
    if (!(student->spec == s)) throw InputError("ViT inversion: the student's spec is not the ensemble's");
    check_model(*student, noise);
  }
  for (size_t i = 0; i < targets.size(); ++i)
    if (targets[i] < 0 || targets[i] >= s.classes)
      throw InputError("ViT inversion: target " + std::to_string(targets[i]) + " of image " + std::to_string(i) +
                       " is outside [0, " + std::to_string(s.classes) + ")");
  if (o.iterations < 0 || !(o.lr > 0) || !(o.tv_weight >= 0) || !(o.l2_weight >= 0) || !(o.js_weight >= 0) ||
      !(o.mask_ratio >= 0 && o.mask_ratio < 1))
    throw InputError("ViT inversion: iterations must be >= 0, the learning rate > 0, the weights >= 0 and the mask "
                     "ratio in [0, 1)");
  for (int at : o.mask_at)
    if (at < 1 || at >= std::max(o.iterations, 1))
      throw InputError("ViT inversion: a masking iteration " + std::to_string(at) + " outside [1, " +
                       std::to_string(o.iterations) + ")");
  Rng rng = Rng::stream(o.seed, Purpose::Generic, 0x1A7E);
  for (Eigen::Index k = 0; k < noise.size(); ++k) noise.data()[k] = static_cast<float>(rng.uniform());
  Inversion out;
  if (targets.empty()) {
    out.images = noise;
    out.cls_attention.resize(0, s.tokens());
    return out;
  }
  const BlasSingleThread single;  // OpenBLAS beside LibTorch: see above check_model
  torch_function<decltype(fednode_torch_vit_invert)>("fednode_torch_vit_invert")(ensemble, student, targets, o, shares,
                                                                                 mix.probabilities(), noise, &out);
  return out;
}

const char* to_string(DistillLoss loss) {
  switch (loss) {
    case DistillLoss::Kd: return "kd";
    case DistillLoss::PseudoLabel: return "pseudo-label";
    case DistillLoss::TokenRelabel: return "token-relabel";
  }
  return "?";
}

const char* to_string(EnsembleRule rule) {
  return rule == EnsembleRule::MeanLogits ? "mean-logits" : "weighted-probabilities";
}

std::vector<double> EnsembleMix::shares(size_t models) const {
  if (!probabilities()) return std::vector<double>(models, 1.0 / static_cast<double>(models));
  if (samples.size() != models)
    throw InputError("ViT ensemble: " + std::to_string(samples.size()) + " sample counts for " + std::to_string(models) +
                     " models");
  double total = 0;
  for (double n : samples) {
    if (!(n > 0) || !std::isfinite(n))
      throw InputError("ViT ensemble: a model's sample count " + std::to_string(n) + " is not a positive number");
    total += n;
  }
  std::vector<double> out;
  for (double n : samples) out.push_back(n / total);
  return out;
}

namespace {

// The models' class scores combined: the share-weighted logits, or (probabilities) the log of the
// share-weighted mixture of their softmaxes.
MatrixF mixed_logits(const std::vector<MatrixF>& each, const std::vector<double>& shares, bool probabilities) {
  const Eigen::Index B = each[0].rows(), C = each[0].cols();
  MatrixF out = MatrixF::Zero(B, C);
  if (!probabilities) {
    for (size_t k = 0; k < each.size(); ++k) out += static_cast<float>(shares[k]) * each[k];
    return out;
  }
  // log sum_k share_k softmax_k, in log space throughout (in double), so that a class every model
  // rules out keeps a finite score however far below the others.
  std::vector<double> terms(each.size());
  for (Eigen::Index b = 0; b < B; ++b) {
    std::vector<double> normaliser(each.size());
    for (size_t k = 0; k < each.size(); ++k) {
      const double top = each[k].row(b).maxCoeff();
      double sum = 0;
      for (Eigen::Index c = 0; c < C; ++c) sum += std::exp(each[k](b, c) - top);
      normaliser[k] = top + std::log(sum);
    }
    for (Eigen::Index c = 0; c < C; ++c) {
      for (size_t k = 0; k < each.size(); ++k) terms[k] = std::log(shares[k]) + each[k](b, c) - normaliser[k];
      const double top = *std::max_element(terms.begin(), terms.end());
      double sum = 0;
      for (double t : terms) sum += std::exp(t - top);
      out(b, c) = static_cast<float>(top + std::log(sum));
    }
  }
  return out;
}

}  // namespace

EnsembleOutput ensemble_forward(const std::vector<VitModel>& ensemble, const MatrixF& images, const EnsembleMix& mix) {
  if (ensemble.empty()) throw InputError("ViT ensemble: no model");
  const std::vector<double> shares = mix.shares(ensemble.size());
  std::vector<MatrixF> each;
  EnsembleOutput out;
  out.cls_attention = MatrixF::Zero(images.rows(), ensemble[0].spec.tokens());
  for (size_t k = 0; k < ensemble.size(); ++k) {
    if (!(ensemble[k].spec == ensemble[0].spec)) throw InputError("ViT ensemble: the models have different specs");
    VitOutput o = vit_class_scores(ensemble[k], images);
    each.push_back(std::move(o.logits));
    out.cls_attention += static_cast<float>(shares[k]) * o.cls_attention;
  }
  out.logits = mixed_logits(each, shares, mix.probabilities());
  return out;
}

MatrixF ensemble_logits(const std::vector<VitModel>& ensemble, const MatrixF& images, const EnsembleMix& mix) {
  return ensemble_forward(ensemble, images, mix).logits;
}

DistillTargets ensemble_targets(const std::vector<VitModel>& ensemble, const MatrixF& images, std::vector<uint8_t> high,
                                const EnsembleMix& mix) {
  DistillTargets t;
  t.teacher_logits = ensemble_logits(ensemble, images, mix);
  t.pseudo.resize(static_cast<size_t>(images.rows()));
  for (Eigen::Index b = 0; b < images.rows(); ++b) {
    Eigen::Index best = 0;
    t.teacher_logits.row(b).maxCoeff(&best);
    t.pseudo[static_cast<size_t>(b)] = static_cast<int>(best);
  }
  t.high = high.empty() ? std::vector<uint8_t>(static_cast<size_t>(images.rows() * ensemble[0].spec.tokens()), 1)
                        : std::move(high);
  return t;
}

namespace {

void check_distillation(const VitModel& student, const MatrixF& images, const DistillTargets& t, const DistillOptions& o) {
  check_model(student, images);
  const VitSpec& s = student.spec;
  const Eigen::Index B = images.rows();
  if (t.teacher_logits.rows() != B || t.teacher_logits.cols() != s.classes)
    throw InputError("ViT distillation: the teacher's scores are " + std::to_string(t.teacher_logits.rows()) + " x " +
                     std::to_string(t.teacher_logits.cols()) + ", expected " + std::to_string(B) + " x " +
                     std::to_string(s.classes));
  if (!all_finite(t.teacher_logits)) throw InputError("ViT distillation: the teacher's scores hold NaN or Inf");
  if (static_cast<Eigen::Index>(t.pseudo.size()) != B)
    throw InputError("ViT distillation: " + std::to_string(t.pseudo.size()) + " pseudo-labels for " + std::to_string(B) +
                     " images");
  for (int y : t.pseudo)
    if (y < 0 || y >= s.classes) throw InputError("ViT distillation: a pseudo-label " + std::to_string(y) + " out of range");
  if (static_cast<int64_t>(t.high.size()) != B * s.tokens())
    throw InputError("ViT distillation: " + std::to_string(t.high.size()) + " high-attention flags for " +
                     std::to_string(B) + " images of " + std::to_string(s.tokens()) + " tokens");
  if (o.epochs < 0 || o.batch_size < 1 || !(o.lr > 0) || !(o.momentum >= 0) || !(o.weight_decay >= 0) ||
      !(o.temperature > 0) || !(o.token_weight >= 0) || !(o.high_weight >= 0) || !(o.low_weight >= 0))
    throw InputError("ViT distillation: epochs must be >= 0, the batch size >= 1, the learning rate and temperature > 0, "
                     "momentum, weight decay and the loss weights >= 0");
}

}  // namespace

VitModel vit_distill(const VitModel& student, const MatrixF& images, const DistillTargets& targets, const DistillOptions& o) {
  check_distillation(student, images, targets, o);
  if (images.rows() == 0 || o.epochs == 0) return student;
  VitModel out;
  const BlasSingleThread single;  // OpenBLAS beside LibTorch: see above check_model
  torch_function<decltype(fednode_torch_vit_distill)>("fednode_torch_vit_distill")(student, images, targets, o, &out);
  return out;
}

double vit_distill_loss(const VitModel& student, const MatrixF& images, const DistillTargets& targets,
                        const DistillOptions& o) {
  check_distillation(student, images, targets, o);
  if (images.rows() == 0) return 0.0;
  double loss = 0;
  const BlasSingleThread single;  // OpenBLAS beside LibTorch: see above check_model
  torch_function<decltype(fednode_torch_vit_distill_loss)>("fednode_torch_vit_distill_loss")(student, images, targets, o,
                                                                                              &loss);
  return loss;
}

}  // namespace fednode
