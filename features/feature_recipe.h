// How an image becomes the features a federation works on: the pixels themselves or a backbone's
// output, read with a preprocessing, then any feature expansion. A node's head records it (head
// files, docs/methods/heads.md) so that `fednode predict`, `fednode export` and fednode::Classifier
// put new images through exactly what the node's own data went through, and refuse a backbone
// that would give other features.
#pragma once

#include "core/types.h"
#include "features/backbone.h"
#include "features/expansion.h"
#include "features/preprocess.h"

#include <atomic>
#include <string>

namespace fednode {

struct FeatureRecipe {
  // Features: the data came as .npy files and nobody said which backbone made them, so only
  // features (not images) can be classified unless a backbone of the right fingerprint is named.
  enum class Source { Features, Pixels, Backbone };
  Source source = Source::Features;
  std::string backbone;             // Backbone: the model file, as an absolute path when recorded
  // Pixels and Backbone: how an image file is read; for pixels, its size and channels are the
  // pixel rows' layout (Fashion-MNIST: 28 px, 1 channel, values in [0, 1]).
  Preprocessing preprocessing;
  std::string backbone_fingerprint = "unnamed";  // before the expansion: "pixels", a backbone's, or the user's
  FeatureExpansion expansion;

  // What knowledge and heads carry: backbone_fingerprint with the expansion folded in.
  std::string fingerprint() const;
  // The width of a row before the expansion (the pixels' or the backbone's output); 0 when unknown.
  int64_t data_dim() const;
  // The width of a row of features, expansion included; 0 when unknown.
  int64_t feature_dim() const;
  bool reads_images() const { return source != Source::Features; }
  // "pixels 28x28x1", "backbone 10467ba50b92 (mobilenet.pt) at 224 px, expanded to 4096".
  std::string describe() const;
};

const char* to_string(FeatureRecipe::Source s);
// Throws InputError naming `where` for a name other than features, pixels, backbone.
FeatureRecipe::Source parse_recipe_source(const std::string& name, const std::string& where);

// What a pixel recipe multiplies byte values by (value_range 0-1): load_fashion_mnist's scale.
constexpr float kPixelScale = 1.0f / 255.0f;

// Fashion-MNIST read as pixels: 28 x 28, one channel, values times kPixelScale, rows as
// load_fashion_mnist gives them.
FeatureRecipe fashion_mnist_pixel_recipe(FeatureExpansion expansion);
// A backbone's features: `model` made absolute, its fingerprint computed from the file.
FeatureRecipe backbone_recipe(const std::string& model, const Preprocessing& preprocessing, FeatureExpansion expansion);

// The recipe with the backbone file at `model` instead of the recorded one (moved, copied, or
// never recorded). Throws InputError naming both fingerprints when the file and its
// preprocessing would not give the recipe's features.
FeatureRecipe with_backbone_file(const FeatureRecipe& recipe, const std::string& model, const Preprocessing& preprocessing);

// Turns images into the recipe's features, one row per image, in order: the backbone loaded once
// (on first use), batched as `fednode extract` runs it, then the expansion. Safe to call from
// several threads at once.
class RecipeEncoder {
 public:
  // Throws InputError for a recipe that cannot read images (Source::Features).
  explicit RecipeEncoder(FeatureRecipe recipe, BackboneOptions options = {});
  ~RecipeEncoder();
  RecipeEncoder(RecipeEncoder&&) noexcept;
  RecipeEncoder& operator=(RecipeEncoder&&) noexcept;

  const FeatureRecipe& recipe() const;
  // Throws InputError for an image the preprocessing refuses, a backbone file that changed since
  // the recipe was recorded; Interrupted when run.stop fires.
  MatrixF encode(const ImageSource& images, const RunOptions& run = {}) const;
  // The expansion alone, for rows that are already the backbone's (or the pixels') output.
  MatrixF expand(MatrixF X) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fednode
