// FGL's CNN as a head ("cnn", docs/protocol.md 5.3): its spec (image_size, channels, width,
// hidden; its classes are the message's) and its parameters in float32.
#pragma once

#include "methods/wire_body.h"

namespace fednode {

class CnnHeadCodec final : public HeadCodec {
 public:
  std::vector<std::string> kinds() const override { return {"cnn"}; }
  uint32_t entries(const Head&) const override { return 2; }
  void write(const Head& head, BodyWriter& w) const override;
  std::shared_ptr<const Head> read(const std::string& kind, BodyValue& map, uint64_t dim, uint64_t classes, BodyReader& r,
                                   const std::function<void()>& rest) const override;
  std::unique_ptr<Head> load(const std::string& kind, std::istream& in, const std::string& where) const override;
};

}  // namespace fednode
