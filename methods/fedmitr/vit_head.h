// FedMITR's head: the distilled ViT itself, which classifies images (rows of pixels) rather than
// a backbone's features. Scoring runs the ViT's forward pass (libfednode_torch.so).
#pragma once

#include "methods/fedmitr/vit.h"
#include "methods/heads/head.h"

#include <iosfwd>
#include <memory>
#include <string>

namespace fednode {

class VitHead : public Head {
 public:
  // Throws InputError for a spec or parameter count a ViT cannot have.
  explicit VitHead(VitModel model);
  std::string kind() const override { return "vit"; }
  int num_classes() const override { return model_.spec.classes; }
  int dim() const override { return model_.spec.pixels(); }
  MatrixF scores(const MatrixF& X) const override;
  ScriptPart script() const override;
  const VitModel& model() const { return model_; }

 protected:
  // The seven numbers of the spec beside the classes (u64 each: image_size, channels, patch, dim,
  // depth, heads, mlp_dim), then the parameters as a 1 x P matrix; docs/methods/heads.md.
  void save_body(std::ostream& out) const override;

 private:
  VitModel model_;
};

// The body after the kind "vit" in a head file; `where` names the file in errors.
std::unique_ptr<Head> load_vit_head(std::istream& in, const std::string& where);

}  // namespace fednode
