// FedPFT's knowledge on the wire (docs/protocol.md 5.2, "fedpft"): per class its label, the samples
// it stands for, its covariance type and its mixture's weights, means and covariances (a full
// covariance as its upper triangle) as knowledge floats, float16 with the half-precision transfer;
// with a shared correlation, the contributors' covariance sketch (variances and a low-rank factor).
#pragma once

#include "methods/wire_body.h"

namespace fednode {

class GmmCodec final : public KnowledgeCodec {
 public:
  void write(const Knowledge& k, BodyWriter& w) const override;
  KnowledgePayload read(BodyValue& body, const Knowledge& k, BodyReader& r) const override;
  void check(const Knowledge& k, const std::string& where, bool check_values) const override;
  void bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const override;
  size_t entries(const Knowledge& k) const override;
};

}  // namespace fednode
