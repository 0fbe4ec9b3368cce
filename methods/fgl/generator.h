// A generative model behind one interface (FGL, docs/methods/fgl.md): images for prompts. The
// built-in TorchScript generators (methods/fgl/torch_generator.h) and an external command
// (methods/fgl/command_generator.h) all answer it, so the receiver that trains on what they draw
// does not know which one drew.
#pragma once

#include "core/image_batch.h"
#include "core/types.h"
#include "methods/fgl/fgl_options.h"
#include "methods/host.h"
#include "methods/method_resource.h"

#include <atomic>
#include <cstdint>
#include <memory>
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

// describe() says what drew the images ("fednode label generator <sha256>").
class Generator : public MethodResource {
 public:
  // Every request's images, in request order. The same requests and seed give the same images,
  // bit for bit. Throws InputError naming the request the generator cannot draw (a name its
  // vocabulary lacks, a command that failed) and Interrupted when `stop` fires.
  virtual ImageBatch generate(const std::vector<GenerationRequest>& requests, uint64_t seed,
                              const std::atomic<bool>* stop) const = 0;
};

// The generator `options` name: the command, or the TorchScript file with its sidecar, read
// through `host`; null when they name none. A file is read once per process and content, so every
// node of a simulation shares it. Throws InputError naming the file or its sidecar.
std::shared_ptr<const Generator> open_generator(const FglOptions& options, std::shared_ptr<const Host> host);

// MODEL.pt -> MODEL.pt.generator
std::string generator_sidecar_path(const std::string& model_path);

}  // namespace fednode
