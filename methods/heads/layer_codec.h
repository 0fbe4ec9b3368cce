// Linear ("linear", "lda") and adapter ("adapter") heads in a head message (docs/protocol.md 5.3):
// `layers`, each {W: out x in, b: out} in float32, one for a linear head and three for an adapter.
#pragma once

#include "methods/wire_body.h"

namespace fednode {

class LayerCodec final : public HeadCodec {
 public:
  std::vector<std::string> kinds() const override { return {"linear", "lda", "adapter"}; }
  uint32_t entries(const Head&) const override { return 1; }
  void write(const Head& head, BodyWriter& w) const override;
  std::shared_ptr<const Head> read(const std::string& kind, BodyValue& map, uint64_t dim, uint64_t classes, BodyReader& r,
                                   const std::function<void()>& rest) const override;
  std::unique_ptr<Head> load(const std::string& kind, std::istream& in, const std::string& where) const override;
};

}  // namespace fednode
