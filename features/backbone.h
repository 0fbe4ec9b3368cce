// A frozen TorchScript image backbone: any module that maps [N, C, S, S] float images to
// [N, D] features, with the preprocessing its sidecar file describes (features/preprocess.h).
// LibTorch stays behind a pimpl so that including this header costs nothing.
#pragma once

#include "features/preprocess.h"
#include "core/types.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace fednode {

struct BackboneOptions {
  int threads = 0;        // LibTorch intra-op threads; 0: one per core (LibTorch's own default here is 1)
  // torch.jit.freeze: parameters become constants, attribute lookups leave the graph and batch
  // norms fold into their convolutions. The same features as the module as loaded up to float
  // rounding (bit for bit when there is nothing to fold, as in the bundled MobileNetV2).
  bool freeze = true;
  // Also torch.jit.optimize_for_inference (oneDNN weight prepacking and layout conversions).
  // Features move by up to ~5e-5. Measured on 2 shared cores it cost 20-30% more CPU per image
  // than the frozen module (docs/performance.md), so it is off unless asked for.
  bool optimize = false;
};

// Random access to the images a backbone runs over. image() is called from several threads at once
// (a batch is decoded and preprocessed in parallel), each with its own `storage`.
class ImageSource {
 public:
  virtual ~ImageSource() = default;
  virtual int64_t size() const = 0;
  // Image i, either pointing into memory the source owns or decoded into `storage`.
  virtual ImageView image(int64_t i, Image& storage) const = 0;
  // Names image i in error messages, e.g. "train image 12" or "photos/cat/001.jpg".
  virtual std::string describe(int64_t i) const = 0;
};

struct RunOptions {
  int batch_size = 64;
  bool progress = true;          // progress line on stderr
  std::string label = "extract";
  // When set and true, extract() throws Interrupted before its next batch: extraction can take
  // minutes, and a node asked to stop (a signal) should not finish it first.
  const std::atomic<bool>* stop = nullptr;
};

class Backbone {
 public:
  // Reads the preprocessing from sidecar_path(model_path).
  static Backbone load(const std::string& model_path, const BackboneOptions& options = {});
  static Backbone load(const std::string& model_path, const Preprocessing& preprocessing,
                       const BackboneOptions& options = {});

  Backbone(Backbone&&) noexcept;
  Backbone& operator=(Backbone&&) noexcept;
  ~Backbone();

  const std::string& model_path() const;
  const Preprocessing& preprocessing() const;
  // backbone_fingerprint(model_path(), preprocessing()), computed once at load.
  const std::string& fingerprint() const;
  int output_dim() const;
  int threads() const;

  // Features of every image of `source`, one row per image, in order.
  MatrixF extract(const ImageSource& source, const RunOptions& run = {}) const;
  // Runs already preprocessed images: `batch` holds n * C * S * S planar floats.
  MatrixF forward(const float* batch, int64_t n) const;

 private:
  struct Impl;
  explicit Backbone(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Hex SHA-256 of the model file's bytes followed by the canonical preprocessing text: two nodes
// agree on it exactly when they compute the same features from the same images.
std::string backbone_fingerprint(const std::string& model_path, const Preprocessing& preprocessing);

// The bundled MobileNetV2 (models/mobilenet_v2_imagenet_features.pt): $FEDNODE_BACKBONE when set,
// else the source tree's models/ (build-tree use), else the installed share/fednode/models/.
std::string default_backbone_path();

}  // namespace fednode
