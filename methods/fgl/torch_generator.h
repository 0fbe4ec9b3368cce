// FGL's TorchScript generators: a file with its sidecar, run by LibTorch inside the node. Two
// kinds, by what a request's images are conditioned on:
//   label: forward(z: Tensor[n, latent], labels: Tensor[n] int64) -> Tensor[n, channels, size, size]
//          A request's `name` is looked up in the sidecar's vocabulary.
//   text:  encode(texts: List[str], negative_texts: List[str]) -> Tensor[m, E]
//          forward(z: Tensor[n, latent], text_embedding: Tensor[n, E]) -> Tensor[n, channels, size, size]
//          A request's caption (its prompt where it has none) and negative prompt are encoded once,
//          and each of its images is drawn from that row. A user who exports a real text-to-image
//          model (docs/methods/fgl.md) fills these two methods; fednode's own is below.
// Images are in [0, 1]. The sidecar, MODEL.pt.generator, is `key = value` lines as the backbone's
// (features/preprocess.h):
//   kind       = label | text
//   latent     = 64           z's width
//   image_size = 28           a multiple of 4
//   channels   = 1
//   class      = T-shirt/top  one line per generator label, in label order: a label generator's
//                             vocabulary; for a text generator, the classes it was trained on (optional)
//   trained_on = ...          provenance: the images it has seen, the seed, the epochs, the trainer
//
// fednode trains both kinds itself (`fednode train-generator [--conditioning text]`) as a DCGAN on a
// public image set no node holds, because no foundation generator can be had on these machines:
// a stand-in for Stable Diffusion that knows only what it was trained on. Its text encoder is a
// learnt bag of hashed words, trained on a few phrasings of each class name.
// No file is read or written here: callers pass bytes and text (open_generator, through its Host; cli/).
#pragma once

#include "methods/fgl/generator.h"
#include "methods/fgl/fgl_options.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fednode {

enum class Conditioning { Label, Text };
const char* to_string(Conditioning c);

struct GeneratorInfo {
  Conditioning kind = Conditioning::Label;
  int latent = 64;
  int image_size = 28;
  int channels = 1;
  std::vector<std::string> vocabulary;   // generator label i is vocabulary[i]
  std::vector<std::string> provenance;   // the trained_on lines, in order

  // Throws InputError naming `where` and the field.
  void validate(const std::string& where) const;
  std::string to_text() const;
  static GeneratorInfo parse(const std::string& text, const std::string& where);
};

// The phrasings a text generator is trained on, "{name}" standing for the class name: the name
// alone, FGL's class-level prompt (FglOptions::prompt) and a caption-like sentence.
const std::vector<std::string>& text_generator_phrasings();

// The DCGAN's recipe (Radford et al.): Adam lr 2e-4, beta1 0.5, batch 64, the non-saturating
// loss, a discriminator that sees the label as extra input planes.
struct GeneratorTrainOptions {
  Conditioning conditioning = Conditioning::Label;
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
  GeneratorInfo info;        // provenance left for the caller to fill
  double seconds = 0;
};

// Trains on `images` (n x channels*size*size in [0, 1]) whose labels index `vocabulary`.
// Throws InputError for images or labels that do not fit, or when training diverges.
TrainedGenerator train_generator(const MatrixF& images, const Labels& labels, int channels, int size,
                                 const std::vector<std::string>& vocabulary, const GeneratorTrainOptions& options);

// A generator over a module's bytes and its sidecar; `digest` (the file's SHA-256) names it.
// A request's images come from latent noise drawn from (seed, request index), so a request's
// images do not depend on the others.
std::shared_ptr<const Generator> make_torch_generator(std::string module, GeneratorInfo info, std::string digest);

}  // namespace fednode
