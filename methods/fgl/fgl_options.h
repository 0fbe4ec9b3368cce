// FGL's options (MethodOptions's own, methods/method.h): the generative model, the prompts, how
// many images to draw, and what the receiver trains on them.
#pragma once

#include "methods/fgl/cnn.h"
#include "methods/method.h"

#include <memory>
#include <string>
#include <vector>

namespace fednode {

// FGL (methods/fgl/, docs/methods/fgl.md): clients send prompts, never data or models; a
// receiver synthesises its training set with a generative model and trains its head on it.
struct FglOptions final : OwnOptions {
  static constexpr const char* kMethod = "fgl";
  // The generative model (open_generator, methods/fgl/generator.h, through the descriptor): a
  // TorchScript generator file with its sidecar, or a command that draws images for a file of
  // prompts. Exactly one is set.
  std::string generator;
  std::string generator_command;
  // The paper's class-level prompts (its section 4, "real world images" for natural images);
  // "{name}" becomes the label's name.
  std::string prompt = "{name}, real world images, high resolution";
  std::string negative_prompt = "low quality, low resolution";
  // Label i's name, where the data does not name its classes (NodeContext::class_names).
  std::vector<std::string> class_names;
  // Synthetic images per sample the prompts stand for: 1 mirrors the federation's class counts.
  double images_per_sample = 1.0;
  int max_images_per_class = 0;  // 0: no cap
  // What the receiver trains on the synthetic images: the paper's network from scratch (a small
  // CNN on the pixels, methods/fgl/cnn.h), or the linear head every other method trains.
  enum class Receiver { Cnn, Linear } receiver = Receiver::Cnn;
  CnnSpec cnn;                // image_size, channels and classes come from the synthetic images
  CnnTrainOptions cnn_train;  // seed: per node, from the run's seed

  std::unique_ptr<OwnOptions> clone() const override { return std::make_unique<FglOptions>(*this); }
};
const char* to_string(FglOptions::Receiver r);  // "cnn" | "linear" 

}  // namespace fednode
