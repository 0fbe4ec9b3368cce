#include "features/feature_recipe.h"

#include "core/parallel.h"

#include <filesystem>
#include <mutex>
#include <optional>

namespace fednode {

namespace fs = std::filesystem;

std::string FeatureRecipe::fingerprint() const { return expanded_fingerprint(backbone_fingerprint, expansion); }

int64_t FeatureRecipe::data_dim() const {
  if (source == Source::Pixels) return preprocessing.channels * int64_t{preprocessing.input_size} * preprocessing.input_size;
  if (source == Source::Backbone) return preprocessing.output_dim;
  return 0;
}

int64_t FeatureRecipe::feature_dim() const { return expansion.enabled() ? expansion.dim : data_dim(); }

std::string FeatureRecipe::describe() const {
  std::string s;
  const std::string side = std::to_string(preprocessing.input_size);
  switch (source) {
    case Source::Features: s = "features " + backbone_fingerprint.substr(0, 12) + " (no images: .npy data)"; break;
    case Source::Pixels: s = "pixels " + side + "x" + side + "x" + std::to_string(preprocessing.channels); break;
    case Source::Backbone:
      s = "backbone " + backbone_fingerprint.substr(0, 12) + " (" + fs::path(backbone).filename().string() + ") at " +
          side + " px";
      break;
  }
  if (expansion.enabled()) s += ", expanded to " + std::to_string(expansion.dim);
  return s;
}

const char* to_string(FeatureRecipe::Source s) {
  switch (s) {
    case FeatureRecipe::Source::Features: return "features";
    case FeatureRecipe::Source::Pixels: return "pixels";
    case FeatureRecipe::Source::Backbone: return "backbone";
  }
  return "?";
}

FeatureRecipe::Source parse_recipe_source(const std::string& name, const std::string& where) {
  if (name == "features") return FeatureRecipe::Source::Features;
  if (name == "pixels") return FeatureRecipe::Source::Pixels;
  if (name == "backbone") return FeatureRecipe::Source::Backbone;
  throw InputError(where + ": feature source '" + name + "' is not features, pixels or backbone");
}

FeatureRecipe fashion_mnist_pixel_recipe(FeatureExpansion expansion) {
  FeatureRecipe r;
  r.source = FeatureRecipe::Source::Pixels;
  r.preprocessing.input_size = 28;
  r.preprocessing.channels = 1;
  r.preprocessing.output_dim = 28 * 28;
  r.backbone_fingerprint = "pixels";
  r.expansion = expansion;
  return r;
}

FeatureRecipe backbone_recipe(const std::string& model, const Preprocessing& preprocessing, FeatureExpansion expansion) {
  FeatureRecipe r;
  r.source = FeatureRecipe::Source::Backbone;
  std::error_code ec;
  const fs::path absolute = fs::absolute(model, ec);
  r.backbone = ec ? model : absolute.lexically_normal().string();
  r.preprocessing = preprocessing;
  r.backbone_fingerprint = backbone_fingerprint(model, preprocessing);
  r.expansion = expansion;
  return r;
}

FeatureRecipe with_backbone_file(const FeatureRecipe& recipe, const std::string& model, const Preprocessing& preprocessing) {
  FeatureRecipe r = backbone_recipe(model, preprocessing, recipe.expansion);
  if (r.backbone_fingerprint != recipe.backbone_fingerprint)
    throw InputError(model + ": this backbone (with its preprocessing) gives features of fingerprint " +
                     r.backbone_fingerprint + ", but the head was trained on features of fingerprint " +
                     recipe.backbone_fingerprint);
  if (recipe.preprocessing.output_dim > 0 && r.preprocessing.output_dim == 0)
    r.preprocessing.output_dim = recipe.preprocessing.output_dim;
  return r;
}

struct RecipeEncoder::Impl {
  FeatureRecipe recipe;
  BackboneOptions options;
  std::mutex mutex;
  std::optional<Backbone> backbone;
  std::optional<MatrixF> projection;

  const Backbone& loaded_backbone() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!backbone) {
      Backbone b = Backbone::load(recipe.backbone, recipe.preprocessing, options);
      // The file may have changed on disk since the head was trained on its features.
      if (b.fingerprint() != recipe.backbone_fingerprint)
        throw InputError(recipe.backbone + ": its features have fingerprint " + b.fingerprint() +
                         ", but the head was trained on features of fingerprint " + recipe.backbone_fingerprint +
                         " (the file changed; name the right one with --backbone)");
      backbone.emplace(std::move(b));
    }
    return *backbone;
  }
};

RecipeEncoder::RecipeEncoder(FeatureRecipe recipe, BackboneOptions options) : impl_(std::make_unique<Impl>()) {
  if (!recipe.reads_images())
    throw InputError("the head was trained on features (" + recipe.backbone_fingerprint.substr(0, 12) +
                     ") from .npy files, with no record of the backbone that made them: give features, or "
                     "name the backbone with --backbone");
  recipe.preprocessing.validate("feature recipe");
  validate(recipe.expansion);
  impl_->recipe = std::move(recipe);
  impl_->options = options;
}

RecipeEncoder::~RecipeEncoder() = default;
RecipeEncoder::RecipeEncoder(RecipeEncoder&&) noexcept = default;
RecipeEncoder& RecipeEncoder::operator=(RecipeEncoder&&) noexcept = default;

const FeatureRecipe& RecipeEncoder::recipe() const { return impl_->recipe; }

MatrixF RecipeEncoder::expand(MatrixF X) const {
  if (!impl_->recipe.expansion.enabled()) return X;
  Features f;
  f.X = std::move(X);
  f.y.assign(static_cast<size_t>(f.X.rows()), 0);
  f.num_classes = 1;
  return expand_features(std::move(f), impl_->recipe.expansion).X;
}

MatrixF RecipeEncoder::encode(const ImageSource& images, const RunOptions& run) const {
  const FeatureRecipe& r = impl_->recipe;
  if (r.source == FeatureRecipe::Source::Backbone) return expand(impl_->loaded_backbone().extract(images, run));
  // Pixels: the preprocessing's planar values are the rows the node's own data were made of.
  // load_fashion_mnist scales by multiplying with 1/255 where preprocess_image divides by 255,
  // and the two differ in the last bit for half the byte values: resized in byte units and then
  // scaled the same way, a 28 x 28 image gives exactly the node's row.
  Preprocessing p = r.preprocessing;
  const bool unit = p.value_range == ValueRange::Unit;
  p.value_range = ValueRange::Byte;
  const float scale = unit ? kPixelScale : 1.0f;
  const int64_t width = p.channels * int64_t{p.input_size} * p.input_size;
  MatrixF X(images.size(), width);
  constexpr int64_t kChunk = 256;
  const int64_t n = images.size();
  for_each_chunk(static_cast<size_t>((n + kChunk - 1) / kChunk), true, [&](size_t chunk) {
    Image storage;
    const int64_t end = std::min(n, static_cast<int64_t>(chunk + 1) * kChunk);
    for (int64_t i = static_cast<int64_t>(chunk) * kChunk; i < end; ++i) {
      preprocess_image(images.image(i, storage), p, X.row(i).data(), images.describe(i));
      if (scale != 1.0f) X.row(i) *= scale;
    }
  });
  interruption_point(run.stop);
  return expand(std::move(X));
}

}  // namespace fednode
