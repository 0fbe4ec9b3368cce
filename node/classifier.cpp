#include "node/classifier.h"

#include "features/extract.h"
#include "features/images.h"

#include <filesystem>
#include <optional>

namespace fednode {
namespace fs = std::filesystem;

namespace {

// Files named one by one, for an application's classify_files.
class FileListSource final : public ImageSource {
 public:
  explicit FileListSource(const std::vector<std::string>& paths) : paths_(paths) {}
  int64_t size() const override { return static_cast<int64_t>(paths_.size()); }
  ImageView image(int64_t i, Image& storage) const override {
    storage = Image{};  // its pixel share first (features/images.h)
    storage = read_image(paths_[static_cast<size_t>(i)]);
    return storage.view();
  }
  std::string describe(int64_t i) const override { return paths_[static_cast<size_t>(i)]; }

 private:
  const std::vector<std::string>& paths_;
};

}  // namespace

MatrixF softmax_rows(const MatrixF& logits) {
  MatrixF p(logits.rows(), logits.cols());
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    const Eigen::RowVectorXd row = logits.row(i).cast<double>();
    const Eigen::RowVectorXd e = (row.array() - row.maxCoeff()).exp();
    p.row(i) = (e / e.sum()).cast<float>();
  }
  return p;
}

struct Classifier::Impl {
  HeadFile file;
  ClassifierOptions options;
  std::optional<RecipeEncoder> encoder;  // null when the recipe reads no images

  Classification classify(const MatrixF& head_input) const {
    Classification c;
    c.logits = file.head->scores(head_input);
    c.probabilities = softmax_rows(c.logits);
    c.labels.resize(static_cast<size_t>(c.logits.rows()));
    for (Eigen::Index i = 0; i < c.logits.rows(); ++i) {
      Eigen::Index best = 0;
      c.logits.row(i).maxCoeff(&best);
      c.labels[static_cast<size_t>(i)] = static_cast<int32_t>(best);
    }
    return c;
  }
};

Classifier::Classifier(HeadFile file, const ClassifierOptions& options) : impl_(std::make_unique<Impl>()) {
  if (!file.head) throw InputError("classifier: no head");
  if (!options.backbone.empty()) {
    FeatureRecipe& r = file.card.recipe;
    if (file.version < 2)
      throw InputError("a version 1 head file records no fingerprint, so no backbone can be checked against it");
    // The recorded preprocessing is part of the fingerprint; a head from .npy features recorded
    // none, so the backbone's sidecar (and --input-size) says how images are read.
    const Preprocessing pre = r.reads_images() ? r.preprocessing : open_backbone_file(options.backbone, options.input_size).preprocessing;
    r = with_backbone_file(r, options.backbone, pre);
  }
  BackboneOptions bo;
  bo.threads = options.threads;
  if (file.card.recipe.reads_images()) impl_->encoder.emplace(file.card.recipe, bo);
  impl_->file = std::move(file);
  impl_->options = options;
}

Classifier Classifier::from_file(const std::string& head_file, const ClassifierOptions& options) {
  return Classifier(read_head_file(head_file), options);
}

std::string state_dir_head_file(const std::string& dir, bool personal) {
  const fs::path path = fs::path(dir) / (personal ? "personal_head" : "head");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(dir + ": not a node's state directory");
  if (!fs::exists(path, ec))
    throw InputError(dir + (personal ? ": holds no personal head (only personalised FedCGS nodes, --personalize, have one)"
                                     : ": holds no head yet (the node has not fitted one)"));
  return path.string();
}

Classifier Classifier::from_state_dir(const std::string& dir, bool personal, const ClassifierOptions& options) {
  return from_file(state_dir_head_file(dir, personal), options);
}

Classifier::~Classifier() = default;
Classifier::Classifier(Classifier&&) noexcept = default;
Classifier& Classifier::operator=(Classifier&&) noexcept = default;

const Head& Classifier::head() const { return *impl_->file.head; }
const HeadCard& Classifier::card() const { return impl_->file.card; }
int Classifier::version() const { return impl_->file.version; }
bool Classifier::reads_images() const { return impl_->encoder.has_value(); }

Classification Classifier::classify_features(const MatrixF& X) const {
  const FeatureRecipe& r = card().recipe;
  const int64_t width = r.data_dim();
  if (width > 0 && X.cols() != width)
    throw InputError("features of " + std::to_string(X.cols()) + " columns, but the head's data came as " +
                     std::to_string(width) + " (" + r.describe() + ")" +
                     (r.expansion.enabled() ? "; give them before the expansion, which the head applies itself" : ""));
  const FeatureExpansion& e = r.expansion;
  if (!e.enabled()) return impl_->classify(X);
  Features f;
  f.X = X;
  f.y.assign(static_cast<size_t>(X.rows()), 0);
  f.num_classes = 1;
  return impl_->classify(expand_features(std::move(f), e).X);
}

MatrixF Classifier::features_of(const ImageSource& images) const {
  if (!impl_->encoder)
    throw InputError("this head reads features from .npy files (fingerprint " + card().recipe.backbone_fingerprint.substr(0, 12) +
                     "), and its file records no backbone: classify features, or name the backbone (--backbone)");
  RunOptions run;
  run.batch_size = impl_->options.batch_size;
  run.progress = impl_->options.progress;
  run.label = "predict";
  run.stop = impl_->options.stop;
  return impl_->encoder->encode(images, run);
}

Classification Classifier::classify_images(const ImageSource& images) const { return impl_->classify(features_of(images)); }

Classification Classifier::classify_files(const std::vector<std::string>& paths) const {
  return classify_images(FileListSource(paths));
}

}  // namespace fednode
