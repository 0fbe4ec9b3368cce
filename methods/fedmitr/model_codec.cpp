#include "methods/fedmitr/model_codec.h"

#include "methods/fedmitr/ensemble_head.h"
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

void ModelCodec::check(const Knowledge& k, const std::string& where, bool check_values) const {
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
    if (check_values)
      for (float v : c.model.parameters)
        if (!std::isfinite(v)) wire_fail(ProtocolErrorCode::InvalidValue, at + ".parameters: NaN or Inf");
  }
}

void ModelCodec::bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const {
  add_entry_samples(samples, body_of<ModelKnowledge>(k.payload).models, where + ".body.models.count", limits);
}

namespace {

// A head's ViT must describe the message's images (its classes are the message's already).
void check_head_spec(const VitSpec& spec, uint64_t dim, const std::string& at) {
  if (static_cast<uint64_t>(spec.pixels()) != dim)
    wire_fail(ProtocolErrorCode::DimensionMismatch, at + ": a ViT of " + std::to_string(spec.pixels()) +
                                                        " pixels per image in a head of dimension " + std::to_string(dim));
}

std::vector<float> read_head_parameters(BodyValue& map, const VitSpec& spec, BodyReader& r) {
  const BodyTensor t = map.at("parameters")->tensor();
  r.expect_shape(t, {static_cast<uint64_t>(spec.parameter_count())}, WireLayout::Dense);
  std::vector<float> out(static_cast<size_t>(spec.parameter_count()));
  r.unpack(t, out.data());
  return out;
}

template <typename Make>
std::shared_ptr<const Head> made_head(Make make) {
  try {
    return make();
  } catch (const ProtocolError&) {
    throw;
  } catch (const std::exception& e) {
    wire_fail(ProtocolErrorCode::InvalidValue, std::string("head: ") + e.what());
  }
}

}  // namespace

void VitHeadCodec::write(const Head& head, BodyWriter& w) const {
  if (const auto* ensemble = dynamic_cast<const EnsembleHead*>(&head)) {
    w.text("rule");
    w.text(to_string(ensemble->mix().rule));
    w.text("models");
    w.array(static_cast<uint32_t>(ensemble->models().size()));
    for (size_t i = 0; i < ensemble->models().size(); ++i) {
      const VitModel& m = ensemble->models()[i];
      w.map(3);
      w.text("count");
      w.uint(static_cast<uint64_t>(std::llround(ensemble->mix().samples[i])));
      w.text("spec");
      write_vit_spec(w, m.spec);
      w.text("parameters");
      w.tensor(WireFloat::F32, WireLayout::Dense, WireShape{m.parameters.size()}, m.parameters.data(),
               "head.models[" + std::to_string(i) + "].parameters");
    }
    return;
  }
  const VitModel& m = dynamic_cast<const VitHead&>(head).model();
  w.text("spec");
  write_vit_spec(w, m.spec);
  w.text("parameters");
  w.tensor(WireFloat::F32, WireLayout::Dense, WireShape{m.parameters.size()}, m.parameters.data(), "head.parameters");
}

// Each spec is checked against the message's dim and classes before its parameters are sized;
// an ensemble's count of models is bounded before any is read.
std::shared_ptr<const Head> VitHeadCodec::read(const std::string& kind, BodyValue& map, uint64_t dim, uint64_t classes,
                                               BodyReader& r, const std::function<void()>& rest) const {
  if (kind == "vit-ensemble") {
    EnsembleMix mix;
    const std::string rule = map.at("rule")->text();
    if (rule == to_string(EnsembleRule::WeightedProbabilities))
      mix.rule = EnsembleRule::WeightedProbabilities;
    else if (rule == to_string(EnsembleRule::MeanLogits))
      mix.rule = EnsembleRule::MeanLogits;
    else
      wire_fail(ProtocolErrorCode::InvalidValue, map.path("rule") + ": '" + printable_text(rule) +
                                                     "' (weighted-probabilities or mean-logits)");
    const auto list = map.at("models");
    const uint32_t n = list->items();
    if (n < 1 || n > kMaxEnsembleModels)
      wire_fail(n ? ProtocolErrorCode::TooLarge : ProtocolErrorCode::InvalidValue,
                list->path() + ": " + std::to_string(n) + " models (1 to " + std::to_string(kMaxEnsembleModels) + ")");
    std::vector<VitModel> models;
    uint64_t samples = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const auto e = list->item(i);
      const uint64_t count = e->at("count")->uint();
      if (count < 1) wire_fail(ProtocolErrorCode::InvalidValue, e->path("count") + ": must be at least 1");
      add_samples(samples, count, e->path("count"), r.limits());
      VitModel m;
      m.spec = read_vit_spec(*e->at("spec"), static_cast<int>(classes));
      check_head_spec(m.spec, dim, e->path("spec"));
      if (i > 0 && !(m.spec == models[0].spec))
        wire_fail(ProtocolErrorCode::InvalidValue, e->path("spec") + ": not the spec of models[0]");
      m.parameters = read_head_parameters(*e, m.spec, r);
      e->finish();
      mix.samples.push_back(static_cast<double>(count));
      models.push_back(std::move(m));
    }
    const auto head = made_head([&] { return std::make_shared<EnsembleHead>(std::move(models), std::move(mix)); });
    rest();
    return head;
  }
  VitModel m;
  m.spec = read_vit_spec(*map.at("spec"), static_cast<int>(classes));
  check_head_spec(m.spec, dim, map.path("spec"));
  m.parameters = read_head_parameters(map, m.spec, r);
  const auto head = made_head([&] { return std::make_shared<VitHead>(std::move(m)); });
  rest();
  return head;
}

std::unique_ptr<Head> VitHeadCodec::load(const std::string& kind, std::istream& in, const std::string& where) const {
  return kind == "vit-ensemble" ? load_ensemble_head(in, where) : load_vit_head(in, where);
}

size_t ModelCodec::entries(const Knowledge& k) const { return body_of<ModelKnowledge>(k.payload).models.size(); }

}  // namespace fednode
