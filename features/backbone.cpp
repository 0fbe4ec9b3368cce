#include "features/backbone.h"

#include "core/digest.h"
#include "core/torch_library.h"
#include "features/backbone_engine.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

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

// LibTorch computes some convolutions with BLAS sgemm, and in a fednode process that symbol binds
// to the OpenBLAS the library links, whose thread pool ignores at::set_num_threads and defaults to
// one thread per core: without this, --threads 1 would still run BLAS on every core. Both previous
// counts are restored afterwards, so the FedCGS Gram products and the head training that may
// follow in the same process (or an embedding application) keep theirs.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : blas_before_(openblas_get_num_threads()) {
    torch_before_ = torch_threads();
    set_torch_threads(threads);
    openblas_set_num_threads(threads);
  }
  ~ThreadScope() {
    if (torch_threads() != torch_before_) set_torch_threads(torch_before_);
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
  int threads = 1;
  std::unique_ptr<BackboneEngine> engine;
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
  auto& load_engine = torch_function<decltype(fednode_torch_load_backbone)>("fednode_torch_load_backbone");
  impl->engine.reset(load_engine(model_path, preprocessing, options));
  impl->fingerprint = backbone_fingerprint(model_path, preprocessing);
  const int dim = impl->engine->output_dim();
  if (dim <= 0) throw InputError(model_path + ": the backbone returns 0-dimensional features");
  if (preprocessing.output_dim > 0 && dim != preprocessing.output_dim)
    throw InputError(model_path + ": the backbone returns " + std::to_string(dim) +
                     "-dimensional features but its preprocessing says output_dim = " +
                     std::to_string(preprocessing.output_dim));
  return Backbone(std::move(impl));
}

const std::string& Backbone::model_path() const { return impl_->path; }
const Preprocessing& Backbone::preprocessing() const { return impl_->pre; }
const std::string& Backbone::fingerprint() const { return impl_->fingerprint; }
int Backbone::output_dim() const { return impl_->engine->output_dim(); }
int Backbone::threads() const { return impl_->threads; }

MatrixF Backbone::forward(const float* batch, int64_t n) const {
  if (n <= 0 || n > kMaxBatch) throw InputError("backbone batch of " + std::to_string(n) + " images");
  const ThreadScope threads(impl_->threads);
  return impl_->engine->forward(batch, n);
}

MatrixF Backbone::extract(const ImageSource& source, const RunOptions& run) const {
  if (run.batch_size <= 0 || run.batch_size > kMaxBatch)
    throw InputError("batch size " + std::to_string(run.batch_size) + " is outside [1, " +
                     std::to_string(kMaxBatch) + "]");
  const ThreadScope threads(impl_->threads);
  return impl_->engine->extract(source, run);
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
