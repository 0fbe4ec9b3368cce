// FGL's knowledge (methods/knowledge.h, KnowledgeBody): what a receiver needs to synthesise a
// contributor's data with a generative model, never the data itself: per class the label's name,
// the class-level prompt and negative prompt, how many samples the class holds, and any
// instance-level prompts (captions of single samples).
#pragma once

#include "methods/knowledge.h"

#include <memory>
#include <string>
#include <vector>

namespace fednode {

struct ClassPrompts {
  int label = 0;
  int64_t count = 0;                  // the contributor's samples of this class
  std::string name;                   // the label's name, as the generator's vocabulary knows it
  std::string prompt;                 // e.g. "{name}, real world images, high resolution"
  std::string negative_prompt;        // e.g. "low quality, low resolution"
  std::vector<std::string> captions;  // instance level: at most `count`, each one sample's
};

// One contributor's prompts. Merging is the union of shards, one per owner, as FedMITR's models:
// the receiver adds the counts of a class over the shards it holds, so pieces that overlap never
// count anyone twice, and a node whose prompts differ from another's keeps its own.
struct PromptShard {
  NodeId owner = 0;
  std::vector<ClassPrompts> classes;  // sorted by label, only classes the owner holds
};

struct PromptKnowledge final : KnowledgeBody {
  std::vector<PromptShard> shards;  // sorted by owner; the owners are the knowledge's contributors

  PromptKnowledge() = default;
  explicit PromptKnowledge(std::vector<PromptShard> s) : shards(std::move(s)) {}
  const char* method() const override { return "fgl"; }
  // The text, and each class's label and count.
  int64_t payload_bytes(bool /*half_precision: no tensors*/) const override {
    int64_t bytes = 0;
    for (const auto& shard : shards) {
      bytes += 4;
      for (const auto& c : shard.classes) {
        bytes += 12 + static_cast<int64_t>(c.name.size() + c.prompt.size() + c.negative_prompt.size());
        for (const auto& caption : c.captions) bytes += static_cast<int64_t>(caption.size());
      }
    }
    return bytes;
  }
  std::unique_ptr<KnowledgeBody> clone() const override { return std::make_unique<PromptKnowledge>(*this); }
};

}  // namespace fednode
