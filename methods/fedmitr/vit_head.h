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

// One ViT in a head file's body (VitHead's, and each member of an ensemble head's): the spec, then
// the parameters; read like network input, InputError naming `where`.
void write_vit_model(std::ostream& out, const VitModel& model);
VitModel read_vit_model(std::istream& in, const std::string& where);

// The ViT's forward pass as the TorchScript method `function`(self, x) -> logits, over tensors
// named prefix0, prefix1, ... (Head::script's contract). Throws InputError for a scripted ViT.
ScriptPart vit_script_part(const VitModel& model, const std::string& function, const std::string& prefix);

// The pieces of that code: the tensors' shapes in vit.h's flat order, and the forward pass's
// TorchScript lines from input `x` ([B, pixels] or [B, C, S, S]) to `h`, the final LayerNorm's
// output [B, T+1, dim], over tensors self.prefix0, ...; `masked` reads a keep-mask `keep`
// [B, T] bool (a stopped patch is no key) and leaves the last block's attention in `attention`.
std::vector<std::vector<int64_t>> vit_tensor_shapes(const VitSpec& s);
std::string vit_forward_lines(const VitSpec& s, const std::string& prefix, bool masked);

}  // namespace fednode
