// FGL's receiver network: the paper trains a network from scratch on the synthetic set; fednode's
// is a small CNN on the images' pixels, run functionally on its flat parameter vector (as the ViT
// of methods/fedmitr/vit.h), so that it travels and is stored as a spec and one vector:
//   conv 3x3 (channels -> width) + ReLU + max-pool 2, conv 3x3 (width -> 2 width) + ReLU + max-pool 2,
//   linear (2 width (s/4)^2 -> hidden) + ReLU, linear (hidden -> classes).
// The flat order is that list, each layer's weight (PyTorch's layout) then its bias.
#pragma once

#include "core/types.h"
#include "methods/heads/head.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace fednode {

struct CnnSpec {
  int image_size = 28;  // a multiple of 4
  int channels = 1;
  int width = 32;
  int hidden = 128;
  int classes = 10;

  int pixels() const { return channels * image_size * image_size; }
  int64_t parameter_count() const;
  // Throws InputError naming `where` for a spec fednode cannot run or would not allocate
  // (at most 2^26 parameters).
  void validate(const std::string& where) const;
  bool operator==(const CnnSpec& o) const;
};

struct CnnModel {
  CnnSpec spec;
  std::vector<float> parameters;
};

// SGD with momentum, as the paper's networks trained on synthetic data; at least `min_steps`
// steps however few the images. 3 epochs: on a validation split (Fashion-MNIST training images
// 45 000-49 999, 45 000 synthetic images) 1, 3 and 10 epochs reached 0.730, 0.762 and 0.760
// (docs/methods/fgl.md, "Choosing the receiver").
struct CnnTrainOptions {
  int epochs = 3;
  int min_steps = 2000;
  int batch_size = 64;
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  uint64_t seed = 0;
  std::function<void(int epoch, double loss)> after_epoch;  // may throw Interrupted; may be empty
};

// Each layer's weight and bias shapes, in the flat order (weight before bias, layer by layer).
std::vector<std::vector<int64_t>> cnn_layer_shapes(const CnnSpec& spec);

// PyTorch's default initialisation (Kaiming-uniform weights, uniform biases), from `seed`.
CnnModel cnn_init(const CnnSpec& spec, uint64_t seed);
// Trains from `start` on images (rows of pixels in [0, 1]) with labels in [0, classes).
// Throws InputError for data that does not fit the spec or training that diverges.
CnnModel train_cnn(const CnnModel& start, const MatrixF& images, const Labels& labels, const CnnTrainOptions& options);

class CnnHead : public Head {
 public:
  // Throws InputError for a spec or parameter count that do not fit.
  explicit CnnHead(CnnModel model);
  std::string kind() const override { return "cnn"; }
  int num_classes() const override { return model_.spec.classes; }
  int dim() const override { return model_.spec.pixels(); }
  MatrixF scores(const MatrixF& X) const override;
  ScriptPart script() const override;
  const CnnModel& model() const { return model_; }

 protected:
  // image_size, channels, width, hidden, classes (u64 each), then the parameters as a 1 x P matrix.
  void save_body(std::ostream& out) const override;

 private:
  CnnModel model_;
};

// The body after the kind "cnn" in a head file; `where` names the file in errors.
std::unique_ptr<Head> load_cnn_head(std::istream& in, const std::string& where);

}  // namespace fednode
