#include "methods/fedmitr/model_codec.h"

#include "methods/fedmitr/vit_head.h"

#include <array>
#include <cmath>

namespace fednode {
namespace {

constexpr std::array<const char*, 7> kSpecKeys = {"image_size", "channels", "patch", "dim", "depth", "heads", "mlp_dim"};

std::array<int*, 7> spec_fields(VitSpec& s) {
  return {&s.image_size, &s.channels, &s.patch, &s.dim, &s.depth, &s.heads, &s.mlp_dim};
}

// A received spec must be one the receiver can run, and must describe the knowledge's images
// and classes; checked before its parameters are allocated.
void check_spec(const VitSpec& spec, const Knowledge& k, const std::string& at) {
  try {
    spec.validate(at);
  } catch (const InputError& e) {
    wire_fail(ProtocolErrorCode::InvalidValue, e.what());
  }
  if (spec.classes != k.num_classes)
    wire_fail(ProtocolErrorCode::DimensionMismatch, at + ": a model of " + std::to_string(spec.classes) +
                                                        " classes in knowledge of " + std::to_string(k.num_classes));
  if (spec.pixels() != k.dim)
    wire_fail(ProtocolErrorCode::DimensionMismatch, at + ": a model of " + std::to_string(spec.pixels()) +
                                                        " pixels per image in knowledge of dimension " +
                                                        std::to_string(k.dim));
}

}  // namespace

void write_vit_spec(BodyWriter& w, const VitSpec& spec) {
  VitSpec s = spec;
  w.map(static_cast<uint32_t>(kSpecKeys.size() + (s.scripted() ? 2 : 0)));
  const auto values = spec_fields(s);
  for (size_t j = 0; j < kSpecKeys.size(); ++j) {
    w.text(kSpecKeys[j]);
    w.uint(static_cast<uint32_t>(*values[j]));
  }
  if (!s.scripted()) return;
  w.text("script");  // a user's TorchScript ViT: which file, and how many parameters it has
  w.text(s.script);
  w.text("parameters");
  w.uint(static_cast<uint64_t>(s.script_parameters));
}

VitSpec read_vit_spec(BodyValue& v, int classes) {
  VitSpec s;
  const auto values = spec_fields(s);
  for (size_t j = 0; j < kSpecKeys.size(); ++j) {
    const uint64_t n = v.at(kSpecKeys[j])->uint();
    if (n > (uint64_t{1} << 30)) wire_fail(ProtocolErrorCode::TooLarge, v.path(kSpecKeys[j]) + ": " + std::to_string(n));
    *values[j] = static_cast<int>(n);
  }
  if (const auto script = v.find("script")) {
    const std::string digest = script->text();
    if (digest.size() > 64)
      wire_fail(ProtocolErrorCode::TooLarge, v.path("script") + ": " + std::to_string(digest.size()) + " bytes");
    s.script = digest;
    const uint64_t n = v.at("parameters")->uint();
    if (n > static_cast<uint64_t>(kMaxVitParameters))
      wire_fail(ProtocolErrorCode::TooLarge, v.path("parameters") + ": " + std::to_string(n));
    s.script_parameters = static_cast<int64_t>(n);
  }
  v.finish();
  s.classes = classes;
  try {
    s.validate(v.path());
  } catch (const ProtocolError&) {
    throw;
  } catch (const InputError& e) {
    wire_fail(ProtocolErrorCode::InvalidValue, e.what());
  }
  return s;
}

void ModelCodec::write(const Knowledge& k, BodyWriter& w) const {
  const auto& m = body_of<ModelKnowledge>(k.payload);
  w.map(1);
  w.text("models");
  w.array(static_cast<uint32_t>(m.models.size()));
  for (size_t i = 0; i < m.models.size(); ++i) {
    const auto& c = m.models[i];
    w.map(4);
    w.text("owner");
    w.uint(c.owner);
    w.text("count");
    w.uint(static_cast<uint64_t>(c.count));
    w.text("spec");
    write_vit_spec(w, c.model.spec);
    w.text("parameters");
    w.tensor(w.floats(), WireLayout::Dense, WireShape{c.model.parameters.size()}, c.model.parameters.data(),
             "knowledge.body.models[" + std::to_string(i) + "].parameters");
  }
}

// The spec's numbers are read as 32-bit values and checked before the parameters' tensor is
// sized; its length must then be the spec's parameter count.
KnowledgePayload ModelCodec::read(BodyValue& body, const Knowledge& k, BodyReader& r) const {
  const auto list = read_one_per_contributor(body, "models", "model", k);
  const uint32_t n = list->items();
  ModelKnowledge m;
  m.models.reserve(n);
  uint64_t samples = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const auto e = list->item(i);
    ClientModel c;
    c.owner = read_owner(*e);
    const uint64_t count = e->at("count")->uint();
    if (count < 1) wire_fail(ProtocolErrorCode::InvalidValue, e->path("count") + ": must be at least 1");
    add_samples(samples, count, e->path("count"), r.limits());
    c.count = static_cast<int64_t>(count);
    c.model.spec = read_vit_spec(*e->at("spec"), k.num_classes);
    check_spec(c.model.spec, k, e->path("spec"));
    const BodyTensor t = e->at("parameters")->tensor();
    e->finish();
    const uint64_t P = static_cast<uint64_t>(c.model.spec.parameter_count());
    r.expect_shape(t, {P}, WireLayout::Dense);
    c.model.parameters.resize(static_cast<size_t>(P));
    r.unpack(t, c.model.parameters.data());
    m.models.push_back(std::move(c));
  }
  body.finish();
  return m;
}

void ModelCodec::check(const Knowledge& k, const std::string& where, bool check_finite) const {
  const auto& m = body_of<ModelKnowledge>(k.payload);
  check_one_per_contributor(m.models, k, where + ".body.models", "model");
  for (size_t i = 0; i < m.models.size(); ++i) {
    const auto& c = m.models[i];
    const std::string at = where + ".body.models[" + std::to_string(i) + "]";
    if (c.count < 1) wire_fail(ProtocolErrorCode::InvalidValue, at + ".count: must be at least 1");
    check_spec(c.model.spec, k, at + ".spec");
    if (static_cast<int64_t>(c.model.parameters.size()) != c.model.spec.parameter_count())
      wire_fail(ProtocolErrorCode::DimensionMismatch, at + ".parameters: " + std::to_string(c.model.parameters.size()) +
                                                          " values, the spec has " +
                                                          std::to_string(c.model.spec.parameter_count()));
    if (check_finite)
      for (float v : c.model.parameters)
        if (!std::isfinite(v)) wire_fail(ProtocolErrorCode::InvalidValue, at + ".parameters: NaN or Inf");
  }
}

void ModelCodec::bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const {
  add_entry_samples(samples, body_of<ModelKnowledge>(k.payload).models, where + ".body.models.count", limits);
}

void VitHeadCodec::write(const Head& head, BodyWriter& w) const {
  const VitModel& m = dynamic_cast<const VitHead&>(head).model();
  w.text("spec");
  write_vit_spec(w, m.spec);
  w.text("parameters");
  w.tensor(WireFloat::F32, WireLayout::Dense, WireShape{m.parameters.size()}, m.parameters.data(), "head.parameters");
}

// The spec is checked against the message's dim and classes before the parameters are sized.
std::shared_ptr<const Head> VitHeadCodec::read(const std::string& /*kind*/, BodyValue& map, uint64_t dim,
                                               uint64_t classes, BodyReader& r, const std::function<void()>& rest) const {
  VitModel m;
  m.spec = read_vit_spec(*map.at("spec"), static_cast<int>(classes));
  if (static_cast<uint64_t>(m.spec.pixels()) != dim)
    wire_fail(ProtocolErrorCode::DimensionMismatch, map.path("spec") + ": a ViT of " + std::to_string(m.spec.pixels()) +
                                                        " pixels per image in a head of dimension " + std::to_string(dim));
  const BodyTensor t = map.at("parameters")->tensor();
  r.expect_shape(t, {static_cast<uint64_t>(m.spec.parameter_count())}, WireLayout::Dense);
  m.parameters.resize(static_cast<size_t>(m.spec.parameter_count()));
  r.unpack(t, m.parameters.data());
  std::shared_ptr<const Head> head;
  try {
    head = std::make_shared<VitHead>(std::move(m));
  } catch (const std::exception& e) {
    wire_fail(ProtocolErrorCode::InvalidValue, std::string("head: ") + e.what());
  }
  rest();
  return head;
}

std::unique_ptr<Head> VitHeadCodec::load(const std::string& /*kind*/, std::istream& in, const std::string& where) const {
  return load_vit_head(in, where);
}

size_t ModelCodec::entries(const Knowledge& k) const { return body_of<ModelKnowledge>(k.payload).models.size(); }

}  // namespace fednode
