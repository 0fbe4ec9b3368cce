// FedMITR's knowledge used as it is: the received models' ensemble as the node's classifier
// (`--receiver-head ensemble`). The teacher the student is distilled from scores far above the
// student in every measured run (docs/methods/fedmitr.md), at M forward passes per image instead
// of one, and with no distillation to wait for.
#pragma once

#include "methods/fedmitr/vit.h"
#include "methods/heads/head.h"

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace fednode {

class EnsembleHead : public Head {
 public:
  // `mix` as the receiver's teacher: its rule, and for WeightedProbabilities the images each model
  // trained on. Throws InputError for no model, models of different specs, a spec or parameter
  // count a ViT cannot have, or weights that do not fit the models.
  EnsembleHead(std::vector<VitModel> models, EnsembleMix mix);
  std::string kind() const override { return "vit-ensemble"; }
  int num_classes() const override { return models_.front().spec.classes; }
  int dim() const override { return models_.front().spec.pixels(); }
  // The teacher's scores (ensemble_logits): the mean of the logits, or the log of the weighted
  // mixture of the models' probabilities.
  MatrixF scores(const MatrixF& X) const override;
  ScriptPart script() const override;
  // "10 ViTs (139018 parameters each) mixed as weighted-probabilities, trained on 500, ... images:
  // 10 forward passes per image".
  std::string composition() const override;
  const std::vector<VitModel>& models() const { return models_; }
  const EnsembleMix& mix() const { return mix_; }

 protected:
  // The rule (u64: 0 mean-logits, 1 weighted-probabilities), the model count M (u64), the M
  // weights as a 1 x M matrix (the images each model trained on), then M ViTs as the "vit" body
  // writes one; docs/methods/heads.md.
  void save_body(std::ostream& out) const override;

 private:
  std::vector<VitModel> models_;
  EnsembleMix mix_;
};

// The most models an ensemble head may hold, in a file or a message: as many as a federation
// may have contributors, which a reader checks before it reads any.
constexpr uint64_t kMaxEnsembleModels = 4096;

// The body after the kind "vit-ensemble" in a head file; `where` names the file in errors.
std::unique_ptr<Head> load_ensemble_head(std::istream& in, const std::string& where);

}  // namespace fednode
