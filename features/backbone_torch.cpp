// Part of libfednode_torch.so (core/torch_library.h): the TorchScript side of features/backbone.h.
// Thread counts are set by the caller (features/backbone.cpp) around every call.
#include "features/backbone_engine.h"

#include "features/progress.h"

#include <ATen/Parallel.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fednode {
namespace {

// What a user needs of a LibTorch error. A c10::Error is its message followed by a C++
// backtrace: the first line. An error raised inside a TorchScript module is a generic first line,
// the module's traceback, and the reason last ("RuntimeError: ..."): that line.
std::string torch_error_reason(const std::string& what) {
  std::vector<std::string> lines;
  std::istringstream in(what);
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  if (lines.empty()) return "(LibTorch gave no reason)";
  if (lines.front().find("TorchScript interpreter") == std::string::npos) return lines.front();
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (it->find("Error: ") != std::string::npos) return it->substr(it->find_first_not_of(' '));
  return lines.back();
}

// LibTorch 1.13 sizes each tensor from the model's pickle and reads its bytes from a record of
// the archive without comparing the two: a record cut short (a damaged or truncated file) is read
// past its end, which gives garbage features or a crash. The module's tensors must not need more
// bytes than the archive's tensor records hold.
void check_tensor_data(const std::string& path, const torch::jit::Module& module) {
  uint64_t held = 0;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const auto& name : reader.getAllRecords()) {
      const bool tensor_record = name.rfind("data/", 0) == 0 || name.find("/data/") != std::string::npos ||
                                 name.rfind("constants/", 0) == 0 || name.find("/constants/") != std::string::npos;
      if (tensor_record) held += std::get<1>(reader.getRecord(name));
    }
  } catch (const std::exception& e) {
    throw InputError(path + ": cannot read the model's archive: " + torch_error_reason(e.what()));
  }
  std::set<const void*> seen;
  uint64_t needed = 0;
  for (const auto& attribute : module.named_attributes(/*recurse=*/true)) {
    if (!attribute.value.isTensor()) continue;
    const at::Tensor& t = attribute.value.toTensor();
    if (!t.defined() || !t.has_storage()) continue;
    if (seen.insert(t.storage().data()).second) needed += t.storage().nbytes();
  }
  if (needed > held)
    throw InputError(path + ": the model's tensors need " + std::to_string(needed) + " bytes of data, but its file " +
                     "holds " + std::to_string(held) + ": the file is damaged or truncated");
}

class TorchScriptEngine final : public BackboneEngine {
 public:
  TorchScriptEngine(const std::string& path, const Preprocessing& pre, const BackboneOptions& options)
      : path_(path), pre_(pre) {
    try {
      module_ = torch::jit::load(path, torch::kCPU);
    } catch (const std::exception& e) {
      throw InputError(path + ": not a TorchScript module LibTorch " TORCH_VERSION " can load: " +
                       torch_error_reason(e.what()));
    }
    check_tensor_data(path, module_);
    module_.eval();
    if (options.freeze || options.optimize) {
      // Modules whose forward mutates their attributes cannot be frozen; those run as loaded, which
      // gives the same features, only with more interpreter work.
      try {
        torch::jit::Module frozen = torch::jit::freeze(module_);
        module_ = options.optimize ? torch::jit::optimize_for_inference(frozen) : frozen;
      } catch (const std::exception&) {
      }
    }
    const int64_t probe_n = 2;
    const int S = pre.input_size;
    output_dim_ = static_cast<int>(run(torch::full({probe_n, pre.channels, S, S}, 0.5f)).size(1));
  }

  int output_dim() const override { return output_dim_; }

  MatrixF forward(const float* batch, int64_t n) const override {
    const int S = pre_.input_size;
    torch::Tensor input =
        torch::from_blob(const_cast<float*>(batch), {n, pre_.channels, S, S}, torch::kFloat32);
    torch::Tensor out = run(input);
    MatrixF X(n, output_dim_);
    std::memcpy(X.data(), out.data_ptr<float>(), sizeof(float) * static_cast<size_t>(n) * output_dim_);
    return X;
  }

  MatrixF extract(const ImageSource& source, const RunOptions& run_options) const override {
    const int64_t n = source.size();
    const int64_t per_image = static_cast<int64_t>(pre_.channels) * pre_.input_size * pre_.input_size;
    const int D = output_dim_;
    const int batch = run_options.batch_size;

    MatrixF X(n, D);
    Progress progress(run_options.label, n, run_options.progress);
    torch::Tensor input = torch::empty({std::min<int64_t>(batch, std::max<int64_t>(n, 1)), pre_.channels,
                                        pre_.input_size, pre_.input_size});
    for (int64_t start = 0; start < n; start += batch) {
      interruption_point(run_options.stop);
      const int64_t b = std::min<int64_t>(batch, n - start);
      float* dst = input.data_ptr<float>();
      // Decoding and resizing are independent per image: spread them over the same threads the
      // convolutions use (at::parallel_for rethrows the first InputError on this thread).
      at::parallel_for(0, b, 1, [&](int64_t lo, int64_t hi) {
        Image storage;
        for (int64_t k = lo; k < hi; ++k) {
          const ImageView view = source.image(start + k, storage);
          preprocess_image(view, pre_, dst + k * per_image, source.describe(start + k));
        }
      });
      torch::Tensor out = run(input.narrow(0, 0, b));
      const float* f = out.data_ptr<float>();
      for (int64_t k = 0; k < b * D; ++k)
        if (!std::isfinite(f[k]))
          throw InputError(path_ + ": the backbone produced a non-finite feature for " +
                           source.describe(start + k / D));
      std::memcpy(X.data() + start * D, f, sizeof(float) * static_cast<size_t>(b * D));
      progress.update(start + b);
    }
    progress.finish();
    return X;
  }

 private:
  std::string shape_text(int64_t n) const {
    return std::to_string(n) + "x" + std::to_string(pre_.channels) + "x" + std::to_string(pre_.input_size) +
           "x" + std::to_string(pre_.input_size);
  }

  // Runs the module and returns a contiguous float [n, D] tensor, or throws InputError saying
  // what the module returned instead.
  torch::Tensor run(const torch::Tensor& input) const {
    c10::InferenceMode guard;
    torch::IValue out;
    try {
      out = module_.forward({input});
    } catch (const std::exception& e) {
      throw InputError(path_ + ": the backbone failed on a batch of shape " + shape_text(input.size(0)) +
                       ": " + torch_error_reason(e.what()));
    }
    if (!out.isTensor())
      throw InputError(path_ + ": the backbone returns a " + out.tagKind() +
                       ", fednode needs one tensor of shape [N, D]");
    torch::Tensor t = out.toTensor();
    const int64_t n = input.size(0);
    // [N, D, 1, 1] is what a backbone ending in adaptive pooling without flatten gives.
    if (t.dim() == 4 && t.size(2) == 1 && t.size(3) == 1) t = t.flatten(1);
    if (t.dim() != 2 || t.size(0) != n) {
      std::string shape;
      for (int64_t s : t.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(s);
      throw InputError(path_ + ": the backbone returns shape [" + shape + "] for " + std::to_string(n) +
                       " images; fednode needs [" + std::to_string(n) + ", D]");
    }
    if (!t.is_floating_point())
      throw InputError(path_ + ": the backbone returns " + std::string(c10::toString(t.scalar_type())) +
                       " features; fednode needs real floating-point ones");
    return t.to(torch::kFloat32).contiguous();
  }

  std::string path_;
  Preprocessing pre_;
  mutable torch::jit::Module module_;
  int output_dim_ = 0;
};

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT fednode::BackboneEngine* fednode_torch_load_backbone(
    const std::string& model_path, const fednode::Preprocessing& preprocessing,
    const fednode::BackboneOptions& options) {
  return new fednode::TorchScriptEngine(model_path, preprocessing, options);
}
