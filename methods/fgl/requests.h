// What an FGL receiver asks its generator for: the shards it holds, added up by class (the
// union by class with counts added), as requests a Generator answers (methods/fgl/generator.h).
#pragma once

#include "methods/fgl/generator.h"
#include "methods/knowledge.h"
#include "methods/method.h"
#include "methods/fgl/prompt_knowledge.h"
#include "methods/fgl/fgl_options.h"

#include <vector>

namespace fednode {

// A node's own prompts: per class it holds, the label's name, the options' prompt with "{name}"
// replaced, and the count. Throws InputError when a held class has no name.
PromptShard own_prompts(const Features& local, NodeId node, const std::vector<std::string>& names,
                        const FglOptions& options);

// One request per caption (instance level, one image each, scaled like the rest) and one per
// distinct (class, name, prompt, negative prompt) for the samples without one (class level),
// sorted by class, then text. A class's count is the sum over the shards, times
// images_per_sample, rounded, capped at max_images_per_class (its requests scaled alike).
std::vector<GenerationRequest> synthesis_requests(const std::vector<const PromptShard*>& shards,
                                                  const FglOptions& options);

}  // namespace fednode
