#include "features/backbone.h"

#include "core/digest.h"
#include "features/progress.h"
#include "core/openmp_threads.h"

#include <ATen/Parallel.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

// From the OpenBLAS the library links (CMakeLists.txt: BLA_VENDOR OpenBLAS).
extern "C" {
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
}

namespace fednode {

namespace {

constexpr const char* kDefaultModelName = "mobilenet_v2_imagenet_features.pt";
constexpr int kMaxBatch = 4096;

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

// LibTorch computes some convolutions with BLAS sgemm, and in a fednode process that symbol binds
// to the OpenBLAS the library links, whose thread pool ignores at::set_num_threads and defaults to
// one thread per core: without this, --threads 1 would still run BLAS on every core. Both previous
// counts are restored afterwards, so the FedCGS Gram products and the head training that may
// follow in the same process (or an embedding application) keep theirs.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : blas_before_(openblas_get_num_threads()) {
    adopt_openmp_thread_default(at::set_num_threads);  // before the first LibTorch call of this thread
    torch_before_ = at::get_num_threads();
    at::set_num_threads(threads);
    openblas_set_num_threads(threads);
  }
  ~ThreadScope() {
    if (at::get_num_threads() != torch_before_) at::set_num_threads(torch_before_);
    openblas_set_num_threads(blas_before_);
  }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int blas_before_;
  int torch_before_ = 0;
};

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace

struct Backbone::Impl {
  std::string path;
  Preprocessing pre;
  std::string fingerprint;
  int output_dim = 0;
  int threads = 1;
  mutable torch::jit::Module module;

  std::string shape_text(int64_t n) const {
    return std::to_string(n) + "x" + std::to_string(pre.channels) + "x" + std::to_string(pre.input_size) +
           "x" + std::to_string(pre.input_size);
  }

  // Runs the module and returns a contiguous float [n, D] tensor, or throws InputError saying
  // what the module returned instead.
  torch::Tensor run(const torch::Tensor& input) const {
    c10::InferenceMode guard;
    torch::IValue out;
    try {
      out = module.forward({input});
    } catch (const std::exception& e) {
      throw InputError(path + ": the backbone failed on a batch of shape " + shape_text(input.size(0)) +
                       ": " + torch_error_reason(e.what()));
    }
    if (!out.isTensor())
      throw InputError(path + ": the backbone returns a " + out.tagKind() +
                       ", fednode needs one tensor of shape [N, D]");
    torch::Tensor t = out.toTensor();
    const int64_t n = input.size(0);
    // [N, D, 1, 1] is what a backbone ending in adaptive pooling without flatten gives.
    if (t.dim() == 4 && t.size(2) == 1 && t.size(3) == 1) t = t.flatten(1);
    if (t.dim() != 2 || t.size(0) != n) {
      std::string shape;
      for (int64_t s : t.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(s);
      throw InputError(path + ": the backbone returns shape [" + shape + "] for " + std::to_string(n) +
                       " images; fednode needs [" + std::to_string(n) + ", D]");
    }
    if (!t.is_floating_point())
      throw InputError(path + ": the backbone returns " + std::string(c10::toString(t.scalar_type())) +
                       " features; fednode needs real floating-point ones");
    return t.to(torch::kFloat32).contiguous();
  }
};

Backbone::Backbone(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Backbone::Backbone(Backbone&&) noexcept = default;
Backbone& Backbone::operator=(Backbone&&) noexcept = default;
Backbone::~Backbone() = default;

Backbone Backbone::load(const std::string& model_path, const BackboneOptions& options) {
  std::error_code ec;
  require_regular_file(model_path, "backbone model file");
  const std::string sidecar = sidecar_path(model_path);
  if (!fs::exists(sidecar, ec))
    throw InputError(sidecar + ": missing; every backbone needs its preprocessing file next to it "
                     "(see docs/backbones.md)");
  return load(model_path, Preprocessing::load(sidecar), options);
}

Backbone Backbone::load(const std::string& model_path, const Preprocessing& preprocessing,
                        const BackboneOptions& options) {
  preprocessing.validate(model_path + " preprocessing");
  require_regular_file(model_path, "backbone model file");
  auto impl = std::make_unique<Impl>();
  impl->path = model_path;
  impl->pre = preprocessing;
  impl->threads = resolve_threads(options.threads);
  const ThreadScope threads(impl->threads);
  try {
    impl->module = torch::jit::load(model_path, torch::kCPU);
  } catch (const std::exception& e) {
    throw InputError(model_path + ": not a TorchScript module LibTorch " TORCH_VERSION " can load: " +
                     torch_error_reason(e.what()));
  }
  check_tensor_data(model_path, impl->module);
  impl->module.eval();
  if (options.freeze || options.optimize) {
    // Modules whose forward mutates their attributes cannot be frozen; those run as loaded, which
    // gives the same features, only with more interpreter work.
    try {
      torch::jit::Module frozen = torch::jit::freeze(impl->module);
      impl->module = options.optimize ? torch::jit::optimize_for_inference(frozen) : frozen;
    } catch (const std::exception&) {
    }
  }
  impl->fingerprint = backbone_fingerprint(model_path, preprocessing);

  const int64_t probe_n = 2;
  const int S = preprocessing.input_size;
  torch::Tensor probe = torch::full({probe_n, preprocessing.channels, S, S}, 0.5f);
  torch::Tensor out = impl->run(probe);
  impl->output_dim = static_cast<int>(out.size(1));
  if (impl->output_dim <= 0) throw InputError(model_path + ": the backbone returns 0-dimensional features");
  if (preprocessing.output_dim > 0 && impl->output_dim != preprocessing.output_dim)
    throw InputError(model_path + ": the backbone returns " + std::to_string(impl->output_dim) +
                     "-dimensional features but its preprocessing says output_dim = " +
                     std::to_string(preprocessing.output_dim));
  return Backbone(std::move(impl));
}

const std::string& Backbone::model_path() const { return impl_->path; }
const Preprocessing& Backbone::preprocessing() const { return impl_->pre; }
const std::string& Backbone::fingerprint() const { return impl_->fingerprint; }
int Backbone::output_dim() const { return impl_->output_dim; }
int Backbone::threads() const { return impl_->threads; }

MatrixF Backbone::forward(const float* batch, int64_t n) const {
  if (n <= 0 || n > kMaxBatch) throw InputError("backbone batch of " + std::to_string(n) + " images");
  const ThreadScope threads(impl_->threads);
  const int S = impl_->pre.input_size;
  torch::Tensor input = torch::from_blob(const_cast<float*>(batch), {n, impl_->pre.channels, S, S},
                                         torch::kFloat32);
  torch::Tensor out = impl_->run(input);
  MatrixF X(n, impl_->output_dim);
  std::memcpy(X.data(), out.data_ptr<float>(), sizeof(float) * static_cast<size_t>(n) * impl_->output_dim);
  return X;
}

MatrixF Backbone::extract(const ImageSource& source, const RunOptions& run) const {
  if (run.batch_size <= 0 || run.batch_size > kMaxBatch)
    throw InputError("batch size " + std::to_string(run.batch_size) + " is outside [1, " +
                     std::to_string(kMaxBatch) + "]");
  const int64_t n = source.size();
  const Preprocessing& pre = impl_->pre;
  const int64_t per_image = static_cast<int64_t>(pre.channels) * pre.input_size * pre.input_size;
  const int D = impl_->output_dim;
  const ThreadScope threads(impl_->threads);

  MatrixF X(n, D);
  Progress progress(run.label, n, run.progress);
  torch::Tensor input = torch::empty({std::min<int64_t>(run.batch_size, std::max<int64_t>(n, 1)),
                                      pre.channels, pre.input_size, pre.input_size});
  for (int64_t start = 0; start < n; start += run.batch_size) {
    interruption_point(run.stop);
    const int64_t b = std::min<int64_t>(run.batch_size, n - start);
    float* dst = input.data_ptr<float>();
    // Decoding and resizing are independent per image: spread them over the same threads the
    // convolutions use (at::parallel_for rethrows the first InputError on this thread).
    at::parallel_for(0, b, 1, [&](int64_t lo, int64_t hi) {
      Image storage;
      for (int64_t k = lo; k < hi; ++k) {
        const ImageView view = source.image(start + k, storage);
        preprocess_image(view, pre, dst + k * per_image, source.describe(start + k));
      }
    });
    torch::Tensor out = impl_->run(input.narrow(0, 0, b));
    const float* f = out.data_ptr<float>();
    for (int64_t k = 0; k < b * D; ++k)
      if (!std::isfinite(f[k]))
        throw InputError(impl_->path + ": the backbone produced a non-finite feature for " +
                         source.describe(start + k / D));
    std::memcpy(X.data() + start * D, f, sizeof(float) * static_cast<size_t>(b * D));
    progress.update(start + b);
  }
  progress.finish();
  return X;
}

std::string backbone_fingerprint(const std::string& model_path, const Preprocessing& preprocessing) {
  Sha256 h;
  h.update_file(model_path);
  // A separator that cannot be confused with a model's last bytes being preprocessing text.
  h.update(std::string("\n--fednode-preprocessing--\n"));
  h.update(preprocessing.canonical());
  return h.hex();
}

std::string default_backbone_path() {
  if (const char* env = std::getenv("FEDNODE_BACKBONE"); env && *env) return env;
  const fs::path in_source = fs::path(FEDNODE_SOURCE_DIR) / "models" / kDefaultModelName;
  std::error_code ec;
  if (fs::is_regular_file(in_source, ec)) return in_source.string();
  return (fs::path(FEDNODE_MODELS_INSTALL_DIR) / kDefaultModelName).string();
}

}  // namespace fednode
