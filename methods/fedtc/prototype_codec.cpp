#include "methods/fedtc/prototype_codec.h"

namespace fednode {

void PrototypeCodec::write(const Knowledge& k, BodyWriter& w) const {
  const auto& p = std::get<PrototypeKnowledge>(k.payload);
  w.map(1);
  w.text("classes");
  w.array(static_cast<uint32_t>(p.classes.size()));
  for (size_t i = 0; i < p.classes.size(); ++i) {
    const auto& c = p.classes[i];
    w.map(3);
    w.text("label");
    w.uint(static_cast<uint32_t>(c.label));
    w.text("count");
    w.uint(static_cast<uint64_t>(c.count));
    w.text("prototypes");
    w.tensor(w.floats(), WireLayout::Dense,
             WireShape{static_cast<uint64_t>(c.prototypes.rows()), static_cast<uint64_t>(c.prototypes.cols())},
             c.prototypes.data(), "knowledge.body.classes[" + std::to_string(i) + "].prototypes");
  }
}

KnowledgePayload PrototypeCodec::read(BodyValue& body, const Knowledge& k, BodyReader& r) const {
  const auto list = read_class_list(body, "classes", k.num_classes);
  const uint32_t n = list->items();
  PrototypeKnowledge p;
  p.classes.reserve(n);
  int previous = -1;
  uint64_t samples = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const auto entry = list->item(i);
    ClassPrototypes c;
    std::tie(c.label, c.count) = read_class_header(*entry, previous, k.num_classes, samples, r.limits());
    previous = c.label;
    const BodyTensor t = entry->at("prototypes")->tensor();
    entry->finish();
    if (t.shape.size() != 2)
      wire_fail(ProtocolErrorCode::DimensionMismatch, t.path + ": must be two-dimensional, shape is " + shape_text(t.shape));
    const uint64_t P = t.shape[0];
    if (P == 0) wire_fail(ProtocolErrorCode::InvalidValue, t.path + ": no prototypes");
    check_limit(P, r.limits().max_prototypes, t.path, "max_prototypes");
    r.expect_shape(t, {P, static_cast<uint64_t>(k.dim)}, WireLayout::Dense);
    c.prototypes.resize(static_cast<Eigen::Index>(P), k.dim);
    r.unpack(t, c.prototypes.data());  // a moved matrix keeps its buffer: the deferred conversion aims at it
    p.classes.push_back(std::move(c));
  }
  body.finish();
  return p;
}

void PrototypeCodec::check(const Knowledge& k, const std::string& where, bool check_values) const {
  const auto& p = std::get<PrototypeKnowledge>(k.payload);
  int previous = -1;
  for (size_t i = 0; i < p.classes.size(); ++i) {
    const auto& c = p.classes[i];
    const std::string at = where + ".body.classes[" + std::to_string(i) + "]";
    check_class_entry(c.label, c.count, previous, k.num_classes, at);
    if (c.prototypes.rows() < 1) wire_fail(ProtocolErrorCode::InvalidValue, at + ": no prototypes");
    expect_dims(c.prototypes, c.prototypes.rows(), k.dim, at + ".prototypes");
    if (check_values) expect_finite(c.prototypes, at + ".prototypes");
    previous = c.label;
  }
}

void PrototypeCodec::bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const {
  const auto& classes = std::get<PrototypeKnowledge>(k.payload).classes;
  for (const auto& c : classes)
    check_limit(static_cast<uint64_t>(c.prototypes.rows()), limits.max_prototypes, where + ".body.classes",
                "max_prototypes");
  add_entry_samples(samples, classes, where + ".body.classes.count", limits);
}

size_t PrototypeCodec::entries(const Knowledge& k) const { return std::get<PrototypeKnowledge>(k.payload).classes.size(); }

}  // namespace fednode
