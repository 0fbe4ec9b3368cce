// Part of libfednode_torch.so (core/torch_library.h): builds and saves the module
// features/classifier_export.h describes.
#include "core/torch_library.h"
#include "features/classifier_export.h"
#include "features/feature_recipe.h"

#include <cstdio>

#include <torch/script.h>


namespace fednode {
namespace {

// float32 1/255 as a TorchScript literal that reads back as the same float32.
std::string unit_scale() {
  char text[40];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(kPixelScale));
  return text;
}

// preprocess(self, images) as preprocess_image computes it (features/preprocess.cpp): values
// in the preprocessing's range, 1 <-> 3 channels as it converts them (PIL's integer luma for
// uint8 RGB into a 1-channel model), resizing as torch.nn.functional.interpolate without
// antialiasing, the centred crop with torchvision's offsets, channel order, then mean and std.
std::string preprocess_code(const Preprocessing& p, bool pixels) {
  const std::string S = std::to_string(p.input_size);
  const std::string divisor = p.value_range == ValueRange::Unit ? "255.0" : "1.0";
  std::string c =
      "def preprocess(self, images: Tensor) -> Tensor:\n"
      "    x = images\n"
      "    if x.dim() == 3:\n"
      "        x = x.unsqueeze(0)\n"
      "    assert x.dim() == 4, 'fednode: images must be [N, C, H, W] or [C, H, W]'\n"
      "    c = x.size(1)\n"
      "    assert c == 1 or c == 3, 'fednode: images must have 1 or 3 channels'\n"
      "    if not x.is_floating_point():\n";
  if (p.channels == 1)
    c += "        if c == 3:\n"
         "            xi = x.long()\n"
         "            x = torch.floor_divide(xi[:, 0:1] * 19595 + xi[:, 1:2] * 38470 + xi[:, 2:3] * 7471 + 32768, 65536)\n";
  // Pixel rows were scaled by multiplying with float32 1/255 (FeatureRecipe's kPixelScale); a
  // backbone's input by dividing by 255 (preprocess_image): bit for bit, as each was.
  c += pixels && p.value_range == ValueRange::Unit ? "        x = x.float() * " + unit_scale() + "\n"
                                                   : "        x = x.float() / " + divisor + "\n";
  c += "    else:\n";
  if (p.channels == 1)
    c += "        if c == 3:\n"
         "            x = x[:, 0:1] * 0.299 + x[:, 1:2] * 0.587 + x[:, 2:3] * 0.114\n";
  c += "        x = x.float() * (255.0 / " + divisor + ")\n";
  if (p.channels == 3)
    c += p.grayscale_to_rgb ? "    if c == 1:\n        x = x.expand([-1, 3, -1, -1])\n"
                            : "    assert c == 3, 'fednode: grayscale image, and the preprocessing says grayscale = reject'\n";
  c += "    h = x.size(2)\n"
       "    w = x.size(3)\n";
  std::string size = "[" + S + ", " + S + "]";
  if (p.fit == FitMode::CenterCrop) {
    c += "    rh = " + S + "\n    rw = " + S + "\n"
         "    if h <= w:\n        rw = int(float(" + S + ") * float(w) / float(h))\n"
         "    else:\n        rh = int(float(" + S + ") * float(h) / float(w))\n"
         // round half to even, as Python's round() and std::nearbyint
         "    top = (rh - " + S + ") // 2\n    if (rh - " + S + ") % 2 == 1 and top % 2 == 1:\n        top = top + 1\n"
         "    left = (rw - " + S + ") // 2\n    if (rw - " + S + ") % 2 == 1 and left % 2 == 1:\n        left = left + 1\n";
    size = "[rh, rw]";
  }
  c += p.resize == ResizeMode::Bilinear ? "    x = torch.upsample_bilinear2d(x, " + size + ", False)\n"
                                        : "    x = torch.upsample_nearest2d(x, " + size + ")\n";
  if (p.fit == FitMode::CenterCrop) c += "    x = x[:, :, top:top + " + S + ", left:left + " + S + "]\n";
  if (p.channels == 3 && p.channel_order == ChannelOrder::Bgr) c += "    x = x.flip([1])\n";
  if (!p.mean.empty()) c += "    x = (x - self.pre_mean) / self.pre_std\n";
  c += "    return x.contiguous()\n";
  return c;
}

at::Tensor tensor_of(const std::vector<float>& values, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<float*>(values.data()), shape, torch::kFloat32).clone();
}

void build(const ExportPlan& plan) {
  torch::jit::Module m("fednode.Classifier");
  for (const ScriptTensor& t : plan.head.tensors) m.register_buffer(t.name, tensor_of(t.values, t.shape));
  std::string code = plan.head.code;
  if (plan.projection.size() > 0) {
    std::vector<float> values(plan.projection.data(), plan.projection.data() + plan.projection.size());
    m.register_buffer("expansion_W", tensor_of(values, {plan.projection.rows(), plan.projection.cols()}));
    code += "def expand(self, x: Tensor) -> Tensor:\n    return torch.relu(torch.matmul(x, self.expansion_W.t()))\n";
  } else {
    code += "def expand(self, x: Tensor) -> Tensor:\n    return x\n";
  }
  if (!plan.images) {
    code += "def forward(self, features: Tensor) -> Tensor:\n"
            "    return self.head(self.expand(features.float()))\n";
  } else {
    const Preprocessing& p = plan.preprocessing;
    if (!p.mean.empty()) {
      m.register_buffer("pre_mean", tensor_of(p.mean, {1, p.channels, 1, 1}));
      m.register_buffer("pre_std", tensor_of(p.std, {1, p.channels, 1, 1}));
    }
    code += preprocess_code(p, plan.backbone.empty());
    if (plan.backbone.empty()) {
      code += "def data_features(self, x: Tensor) -> Tensor:\n    return x.reshape([x.size(0), -1])\n";
    } else {
      torch::jit::Module backbone = torch::jit::load(plan.backbone, torch::kCPU);
      backbone.eval();
      // Frozen, as Backbone runs it by default (batch norms folded into their convolutions), so
      // that the module computes what the node computed, not the same up to float rounding;
      // a module that cannot be frozen runs as loaded there too.
      try {
        backbone = torch::jit::freeze(backbone);
      } catch (const std::exception&) {
      }
      m.register_module("backbone", backbone);
      // As Backbone::extract reads its output: [N, D, 1, 1] flattened, float32.
      code += "def data_features(self, x: Tensor) -> Tensor:\n"
              "    f = self.backbone.forward(x)\n"
              "    if f.dim() == 4:\n"
              "        f = f.flatten(1)\n"
              "    return f.float()\n";
    }
    code += "def features(self, images: Tensor) -> Tensor:\n"
            "    return self.expand(self.data_features(self.preprocess(images)))\n"
            "def forward(self, images: Tensor) -> Tensor:\n"
            "    return self.head(self.features(images))\n";
  }
  m.define(code);
  m.eval();
  m.save(plan.out);
}

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT void fednode_torch_export_classifier(const fednode::ExportPlan& plan, std::string* error) {
  try {
    fednode::build(plan);
  } catch (const std::exception& e) {
    *error = e.what();
  }
}
