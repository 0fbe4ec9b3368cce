#include "methods/fgl/cnn_codec.h"

#include "methods/fgl/cnn.h"

#include <utility>

namespace fednode {

void CnnHeadCodec::write(const Head& head, BodyWriter& w) const {
  const CnnModel& m = dynamic_cast<const CnnHead&>(head).model();
  const CnnSpec& c = m.spec;
  w.text("spec");
  w.map(4);
  for (auto [key, value] : {std::pair<const char*, int>{"image_size", c.image_size}, {"channels", c.channels},
                            {"width", c.width}, {"hidden", c.hidden}}) {
    w.text(key);
    w.uint(static_cast<uint32_t>(value));
  }
  w.text("parameters");
  w.tensor(WireFloat::F32, WireLayout::Dense, WireShape{m.parameters.size()}, m.parameters.data(), "head.parameters");
}

// Its four numbers beside the message's classes, checked (CnnSpec::validate) and matched to the
// message's dim before the parameters are sized.
std::shared_ptr<const Head> CnnHeadCodec::read(const std::string& /*kind*/, BodyValue& map, uint64_t dim,
                                               uint64_t classes, BodyReader& r, const std::function<void()>& rest) const {
  const auto spec = map.at("spec");
  CnnModel m;
  m.spec.classes = static_cast<int>(classes);
  for (auto [key, field] : {std::pair<const char*, int*>{"image_size", &m.spec.image_size}, {"channels", &m.spec.channels},
                            {"width", &m.spec.width}, {"hidden", &m.spec.hidden}}) {
    const uint64_t v = spec->at(key)->uint();
    check_limit(v, uint64_t{1} << 20, spec->path(key), "a CNN's spec");
    *field = static_cast<int>(v);
  }
  spec->finish();
  try {
    m.spec.validate(map.path("spec"));
  } catch (const InputError& e) {
    wire_fail(ProtocolErrorCode::InvalidValue, e.what());
  }
  if (static_cast<uint64_t>(m.spec.pixels()) != dim)
    wire_fail(ProtocolErrorCode::DimensionMismatch, map.path("spec") + ": a CNN of " + std::to_string(m.spec.pixels()) +
                                                        " pixels per image in a head of dimension " + std::to_string(dim));
  const BodyTensor t = map.at("parameters")->tensor();
  r.expect_shape(t, {static_cast<uint64_t>(m.spec.parameter_count())}, WireLayout::Dense);
  m.parameters.resize(static_cast<size_t>(m.spec.parameter_count()));
  r.unpack(t, m.parameters.data());
  auto head = std::make_shared<CnnHead>(std::move(m));
  rest();
  return head;
}

std::unique_ptr<Head> CnnHeadCodec::load(const std::string& /*kind*/, std::istream& in, const std::string& where) const {
  return load_cnn_head(in, where);
}

}  // namespace fednode
