// A generative model behind one interface (FGL, docs/methods/fgl.md): images for prompts. The
// built-in label-conditioned generator (methods/fgl/torch_generator.h), a user's text-conditioned
// TorchScript model and an external command (node/generator.h opens either) all answer it, so the
// receiver that trains on what they draw does not know which one drew.
#pragma once

#include "core/image_batch.h"
#include "core/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fednode {

// `count` images of the federation's class `label`. A label-conditioned generator reads `name`
// (its vocabulary's word for the class); a text-conditioned one the prompt, or the caption for
// an instance-level request.
struct GenerationRequest {
  int label = 0;
  int64_t count = 0;
  std::string name;
  std::string prompt;
  std::string negative_prompt;
  std::string caption;  // instance level; empty for a class-level request
};


class Generator {
 public:
  virtual ~Generator() = default;
  // What drew the images, for progress lines and reports ("fednode label generator <sha256>").
  virtual std::string describe() const = 0;
  // Every request's images, in request order. The same requests and seed give the same images,
  // bit for bit. Throws InputError naming the request the generator cannot draw (a name its
  // vocabulary lacks, a command that failed) and Interrupted when `stop` fires.
  virtual ImageBatch generate(const std::vector<GenerationRequest>& requests, uint64_t seed,
                                   const std::atomic<bool>* stop) const = 0;
};

}  // namespace fednode
