// FGL's knowledge on the wire (docs/protocol.md 5.2, "fgl"): one shard per contributor, each with
// per class the label, the samples, the label's name, the prompt, the negative prompt and any
// captions, all UTF-8 text without control characters.
#pragma once

#include "methods/wire_body.h"
#include "methods/fgl/prompt_knowledge.h"

namespace fednode {

class PromptCodec final : public KnowledgeCodec {
 public:
  void write(const Knowledge& k, BodyWriter& w) const override;
  KnowledgePayload read(BodyValue& body, const Knowledge& k, BodyReader& r) const override;
  void check(const Knowledge& k, const std::string& where, bool check_values) const override;
  void bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const override;
  size_t entries(const Knowledge& k) const override;
};

}  // namespace fednode
