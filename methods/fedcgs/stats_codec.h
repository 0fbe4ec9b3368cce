// FedCGS's knowledge on the wire (docs/protocol.md 5.2, "fedcgs"; 6.2): the per-class sums A (C x d)
// and the Gram matrix B (d x d, its upper triangle) as float64 tensors, since additive statistics
// must stay exact; the counts N; DP-FedCGS's noise variances; and under secure aggregation the
// masked parts as ring elements, whose plain counterparts are then left out.
#pragma once

#include "methods/wire_body.h"

namespace fednode {

class StatsCodec final : public KnowledgeCodec {
 public:
  void write(const Knowledge& k, BodyWriter& w) const override;
  KnowledgePayload read(BodyValue& body, const Knowledge& k, BodyReader& r) const override;
  void check(const Knowledge& k, const std::string& where, bool check_values) const override;
  void bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const override;
  size_t entries(const Knowledge& k) const override;
};

}  // namespace fednode
