// Part of libfednode_torch.so (core/torch_library.h): the built-in ViT written as a TorchScript
// file in `--vit-script`'s interface (scripts/export_vit.py documents it), with a model's
// parameters as the file's, so that a pretrained model (`fednode train-vit`) becomes a
// federation's shared start.
#include "methods/fedmitr/vit_torch.h"

#include "core/types.h"
#include "methods/fedmitr/vit_head.h"

#include <torch/script.h>

#include <sstream>

namespace fednode {
namespace {

void write_script(const VitModel& model, std::string* bytes) {
  const VitSpec& s = model.spec;
  if (s.scripted()) throw InputError("ViT script: the model already runs a TorchScript file (" + s.script.substr(0, 16) + "...)");
  torch::jit::Module m("fednode.PretrainedVit");
  for (const auto& [name, value] : {std::pair<const char*, int>{"image_size", s.image_size}, {"channels", s.channels},
                                    {"patch", s.patch}, {"classes", s.classes}})
    m.register_attribute(name, c10::IntType::get(), int64_t{value});
  // Registered in vit.h's flat order, which is then the file's named_parameters() order.
  int64_t at = 0;
  const std::vector<std::vector<int64_t>> shapes = vit_tensor_shapes(s);
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t size = 1;
    for (int64_t d : shapes[i]) size *= d;
    if (at + size > static_cast<int64_t>(model.parameters.size())) throw InputError("ViT script: too few parameters for the spec");
    const torch::Tensor p =
        torch::from_blob(const_cast<float*>(model.parameters.data() + at), shapes[i], torch::kFloat32).clone();
    m.register_parameter("p" + std::to_string(i), p, /*is_buffer=*/false);
    at += size;
  }
  if (at != static_cast<int64_t>(model.parameters.size()))
    throw InputError("ViT script: " + std::to_string(model.parameters.size()) + " parameters for a spec of " + std::to_string(at));
  // export_vit.py's ScriptedVit, with the patches cut by reshapes instead of F.unfold, which a
  // module defined from C++ cannot name.
  const int last = 4 + 12 * s.depth;
  m.define("def forward(self, x: Tensor, keep: Tensor) -> Tuple[Tensor, Tensor, Tensor]:\n" +
           vit_forward_lines(s, "p", true) + "    scores = torch.linear(h, self.p" + std::to_string(last + 2) + ", self.p" +
           std::to_string(last + 3) + ")\n" + "    return scores[:, 0], scores[:, 1:], attention[:, :, 0, 1:].mean(1)\n");
  m.eval();
  std::ostringstream out;
  m.save(out);
  *bytes = out.str();
}

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT void fednode_torch_vit_write_script(const fednode::VitModel& model, std::string* bytes) {
  fednode::write_script(model, bytes);
}
