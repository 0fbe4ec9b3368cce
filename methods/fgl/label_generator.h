// FGL's built-in generator: a label-conditioned DCGAN that fednode trains itself
// (`fednode train-generator`) on a public image set no node holds, because no foundation
// generator can be had on these machines. It is a stand-in for Stable Diffusion, and it knows
// only what it was trained on: its sidecar names the images (docs/methods/fgl.md).
//
// The generator is a TorchScript module, so that any LibTorch or PyTorch program can run it:
//   forward(z: Tensor[n, latent], labels: Tensor[n] int64) -> Tensor[n, channels, size, size] in [0, 1]
// Its sidecar, MODEL.pt.generator, is `key = value` lines as the backbone's (features/preprocess.h):
//   kind       = label        the only kind this file describes
//   latent     = 64           z's width
//   image_size = 28           a multiple of 4
//   channels   = 1
//   class      = T-shirt/top  one line per generator label, in label order: its vocabulary
//   trained_on = ...          provenance: the images it has seen, the seed, the epochs, the trainer
// No file is read or written here: callers pass bytes and text (node/generator.h, cli/).
#pragma once

#include "core/generator.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fednode {

struct LabelGeneratorInfo {
  int latent = 64;
  int image_size = 28;
  int channels = 1;
  std::vector<std::string> vocabulary;   // generator label i is vocabulary[i]
  std::vector<std::string> provenance;   // the trained_on lines, in order

  // Throws InputError naming `where` and the field.
  void validate(const std::string& where) const;
  std::string to_text() const;
  static LabelGeneratorInfo parse(const std::string& text, const std::string& where);
};

// The DCGAN's recipe (Radford et al.): Adam lr 2e-4, beta1 0.5, batch 64, the non-saturating
// loss, a discriminator that sees the label as extra input planes.
struct GeneratorTrainOptions {
  int latent = 64;
  int width = 64;           // the generator's last hidden planes; the first has twice as many
  int epochs = 20;
  int batch_size = 64;
  double lr = 2e-4;
  double beta1 = 0.5;
  uint64_t seed = 1;
  std::function<void(const std::string&)> progress;  // a line per epoch; may be empty
  const std::atomic<bool>* stop = nullptr;
};

struct TrainedGenerator {
  std::string module;        // the TorchScript file's bytes
  LabelGeneratorInfo info;   // provenance left for the caller to fill
  double seconds = 0;
};

// Trains on `images` (n x channels*size*size in [0, 1]) whose labels index `vocabulary`.
// Throws InputError for images or labels that do not fit, or when training diverges.
TrainedGenerator train_label_generator(const MatrixF& images, const Labels& labels, int channels, int size,
                                       const std::vector<std::string>& vocabulary, const GeneratorTrainOptions& options);

// A generator over a module's bytes and its sidecar; `digest` (the file's SHA-256) names it.
// A request's `name` picks the generator label; its images come from latent noise drawn from
// (seed, request index), so a request's images do not depend on the others.
std::shared_ptr<const Generator> make_label_generator(std::string module, LabelGeneratorInfo info, std::string digest);

}  // namespace fednode
