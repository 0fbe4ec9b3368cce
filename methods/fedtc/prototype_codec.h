// FedTC's knowledge on the wire (docs/protocol.md 5.2, "fedtc"): per class its label, the samples
// behind it and its prototypes, a P x d tensor of knowledge floats.
#pragma once

#include "methods/wire_body.h"

namespace fednode {

class PrototypeCodec final : public KnowledgeCodec {
 public:
  void write(const Knowledge& k, BodyWriter& w) const override;
  KnowledgePayload read(BodyValue& body, const Knowledge& k, BodyReader& r) const override;
  void check(const Knowledge& k, const std::string& where, bool check_values) const override;
  void bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const override;
  size_t entries(const Knowledge& k) const override;
};

}  // namespace fednode
