// Opens the generative model a node's method draws from (NodeContext::generator): the built-in
// label-conditioned TorchScript file with its sidecar (methods/fgl/torch_generator.h), or an
// external command (features/command_generator.h). Here because it reads files and runs
// programs, which methods/ may not.
#pragma once

#include "core/generator.h"
#include "methods/method.h"
#include "methods/fgl/fgl_options.h"

#include <memory>
#include <string>

namespace fednode {

// Null when the options name no generator. A file is read once per process and content: every
// node of a simulation shares it. Throws InputError naming the file or its sidecar.
std::shared_ptr<const Generator> open_generator(const FglOptions& options);

// MODEL.pt -> MODEL.pt.generator
std::string generator_sidecar_path(const std::string& model_path);

}  // namespace fednode
