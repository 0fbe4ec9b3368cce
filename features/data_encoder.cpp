#include "features/data_encoder.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>

namespace fednode {
namespace {

// Synthetic images as a backbone reads files: 8-bit, channels interleaved. A generator's [0, 1]
// values are rounded to the 8 bits a real image has, so an image the generator drew and the same
// image saved as PNG (the external-command contract) give the same features.
class SyntheticSource final : public ImageSource {
 public:
  explicit SyntheticSource(const ImageBatch& images) : images_(images) {}
  int64_t size() const override { return images_.pixels.rows(); }
  ImageView image(int64_t i, Image& storage) const override {
    const int c = images_.channels, s = images_.size;
    storage.height = storage.width = s;
    storage.channels = c;
    storage.pixels.resize(static_cast<size_t>(c) * s * s);
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < s * s; ++p) {
        const float v = std::clamp(images_.pixels(i, static_cast<Eigen::Index>(ch) * s * s + p), 0.0f, 1.0f);
        storage.pixels[static_cast<size_t>(p) * c + ch] = static_cast<uint8_t>(std::lround(v * 255.0f));
      }
    return storage.view();
  }
  std::string describe(int64_t i) const override { return "synthetic image " + std::to_string(i); }

 private:
  const ImageBatch& images_;
};

void check_shape(const ImageBatch& images, const std::string& who) {
  if (images.channels < 1 || images.size < 1 ||
      images.pixels.cols() != static_cast<Eigen::Index>(images.channels) * images.size * images.size)
    throw InputError(who + ": images of " + std::to_string(images.pixels.cols()) + " values are not " +
                     std::to_string(images.channels) + " x " + std::to_string(images.size) + " x " +
                     std::to_string(images.size));
}

MatrixF expanded(MatrixF X, const FeatureExpansion& expansion) {
  if (!expansion.enabled()) return X;
  Features f;
  f.X = std::move(X);
  f.y.assign(static_cast<size_t>(f.X.rows()), 0);
  f.num_classes = 1;
  return expand_features(std::move(f), expansion).X;
}

std::string expansion_note(const FeatureExpansion& e) {
  return e.enabled() ? ", expanded to " + std::to_string(e.dim) : "";
}

class BackboneEncoder final : public ImageEncoder {
 public:
  BackboneEncoder(std::string model, Preprocessing pre, BackboneOptions options, FeatureExpansion expansion)
      : model_(std::move(model)), pre_(std::move(pre)), options_(options), expansion_(expansion),
        fingerprint_(backbone_fingerprint(model_, pre_)) {}

  std::string describe() const override {
    return "backbone " + fingerprint_.substr(0, 12) + " at " + std::to_string(pre_.input_size) + " px" +
           expansion_note(expansion_);
  }

  MatrixF encode(const ImageBatch& images, const std::atomic<bool>* stop) const override {
    check_shape(images, describe());
    RunOptions run;
    run.progress = false;  // the method says how long it took
    run.stop = stop;
    return expanded(backbone().extract(SyntheticSource(images), run), expansion_);
  }

 private:
  const Backbone& backbone() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!backbone_) {
      backbone_.emplace(Backbone::load(model_, pre_, options_));
      // The file the data came through may have changed on disk since: its features would not be
      // the node's.
      if (backbone_->fingerprint() != fingerprint_)
        throw InputError(model_ + ": changed since the node's features were computed from it (fingerprint " +
                         backbone_->fingerprint().substr(0, 12) + ", not " + fingerprint_.substr(0, 12) + ")");
    }
    return *backbone_;
  }

  std::string model_;
  Preprocessing pre_;
  BackboneOptions options_;
  FeatureExpansion expansion_;
  std::string fingerprint_;
  mutable std::mutex mutex_;
  mutable std::optional<Backbone> backbone_;
};

class PixelEncoder final : public ImageEncoder {
 public:
  explicit PixelEncoder(FeatureExpansion expansion) : expansion_(expansion) {}
  std::string describe() const override { return "pixels" + expansion_note(expansion_); }
  MatrixF encode(const ImageBatch& images, const std::atomic<bool>*) const override {
    check_shape(images, describe());
    return expanded(images.pixels, expansion_);
  }

 private:
  FeatureExpansion expansion_;
};

}  // namespace

std::shared_ptr<const ImageEncoder> backbone_encoder(std::string model, Preprocessing preprocessing,
                                                     BackboneOptions options, FeatureExpansion expansion) {
  return std::make_shared<BackboneEncoder>(std::move(model), std::move(preprocessing), options, expansion);
}

std::shared_ptr<const ImageEncoder> pixel_encoder(FeatureExpansion expansion) {
  return std::make_shared<PixelEncoder>(expansion);
}

}  // namespace fednode
