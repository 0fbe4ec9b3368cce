// Head payloads: a trained LinearHead ("linear", "lda"), AdapterHead ("adapter"), FedMITR's
// distilled ViT ("vit") or FGL's CNN ("cnn").
#include "methods/fedmitr/vit_head.h"
#include "methods/fgl/cnn.h"
#include "protocol/payload_parts.h"
#include "protocol/tensor.h"

namespace fednode {

using namespace wire;

namespace {

[[noreturn]] void fail(ProtocolErrorCode code, const std::string& message) { throw ProtocolError(code, message); }

using Shape = std::vector<uint64_t>;
uint64_t u(Eigen::Index v) { return static_cast<uint64_t>(v); }

void pack_layer(Packer& pk, std::string& out, const MatrixF& W, const VectorF& b, const std::string& at) {
  if (b.size() != W.rows())
    fail(ProtocolErrorCode::DimensionMismatch, at + ": bias of " + std::to_string(b.size()) + " for " +
                                                   std::to_string(W.rows()) + " outputs");
  pk.pack_map(2);
  pack_str(pk, "W");
  pack_tensor(pk, out, DType::F32, Layout::Dense, Shape{u(W.rows()), u(W.cols())}, W.data(), at + ".W");
  pack_str(pk, "b");
  pack_tensor(pk, out, DType::F32, Layout::Dense, Shape{u(b.size())}, b.data(), at + ".b");
}

// One layer whose input width is known; its output width comes from W's shape, bounded by
// `max_out` before anything is allocated. `expected_out` > 0 pins it (the class count).
AdapterHead::Layer read_layer(const msgpack::object& o, const std::string& at, uint64_t in, uint64_t expected_out,
                              uint64_t max_out) {
  MapReader m(o, at);
  const TensorIn W = read_tensor(m.at("W"), m.path("W"));
  const TensorIn b = read_tensor(m.at("b"), m.path("b"));
  m.finish();
  if (W.shape.size() != 2)
    fail(ProtocolErrorCode::DimensionMismatch, W.path + ": must be two-dimensional, shape is " + shape_string(W.shape));
  const uint64_t out = W.shape[0];
  if (expected_out > 0 && out != expected_out)
    fail(ProtocolErrorCode::DimensionMismatch, W.path + ": " + std::to_string(out) + " outputs, expected " +
                                                   std::to_string(expected_out));
  if (out == 0) fail(ProtocolErrorCode::InvalidValue, W.path + ": layer has no outputs");
  check_limit(out, max_out, W.path, "max_dim");
  expect_shape(W, {out, in}, Layout::Dense);
  expect_shape(b, {out}, Layout::Dense);
  AdapterHead::Layer layer;
  layer.W.resize(static_cast<Eigen::Index>(out), static_cast<Eigen::Index>(in));
  layer.b.resize(static_cast<Eigen::Index>(out));
  unpack_tensor(W, layer.W.data());
  unpack_tensor(b, layer.b.data());
  return layer;
}

// Absent classes' rows must be zero: a mean for a class no one holds would be made up.
std::shared_ptr<const ClassMeans> read_class_means(const msgpack::object& o, uint64_t classes, uint64_t dim) {
  MapReader m(o, "head.class_means");
  const TensorIn means = read_tensor(m.at("means"), m.path("means"));
  const auto& present = as_array(m.at("present"), m.path("present"));
  m.finish();
  expect_shape(means, {classes, dim}, Layout::Dense);
  if (present.size != classes)
    fail(ProtocolErrorCode::DimensionMismatch, m.path("present") + ": " + std::to_string(present.size) +
                                                   " entries for " + std::to_string(classes) + " classes");
  auto r = std::make_shared<ClassMeans>();
  r->means.resize(static_cast<Eigen::Index>(classes), static_cast<Eigen::Index>(dim));
  unpack_tensor(means, r->means.data());
  for (uint32_t c = 0; c < present.size; ++c) {
    r->present.push_back(as_bool(present.ptr[c], m.path("present") + "[" + std::to_string(c) + "]"));
    if (!r->present.back() && !r->means.row(c).isZero())
      fail(ProtocolErrorCode::InvalidValue, m.path("means") + ": class " + std::to_string(c) +
                                                " is absent but has a non-zero mean");
  }
  return r;
}

// The spec is checked against the message's dim and classes before the parameters are sized.
std::shared_ptr<const Head> read_vit(MapReader& map, uint64_t dim, uint64_t classes) {
  VitModel m;
  m.spec = read_vit_spec(map.at("spec"), map.path("spec"), static_cast<int>(classes));
  if (static_cast<uint64_t>(m.spec.pixels()) != dim)
    fail(ProtocolErrorCode::DimensionMismatch, map.path("spec") + ": a ViT of " + std::to_string(m.spec.pixels()) +
                                                   " pixels per image in a head of dimension " + std::to_string(dim));
  const TensorIn t = read_tensor(map.at("parameters"), map.path("parameters"));
  expect_shape(t, {static_cast<uint64_t>(m.spec.parameter_count())}, Layout::Dense);
  m.parameters.resize(static_cast<size_t>(m.spec.parameter_count()));
  unpack_tensor(t, m.parameters.data());
  try {
    return std::make_shared<VitHead>(std::move(m));
  } catch (const std::exception& e) {
    fail(ProtocolErrorCode::InvalidValue, std::string("head: ") + e.what());
  }
}

// FGL's CNN: its four numbers beside the message's classes, checked (CnnSpec::validate) and
// matched to the message's dim before the parameters are sized.
std::shared_ptr<const Head> read_cnn(MapReader& map, uint64_t dim, uint64_t classes) {
  MapReader spec(map.at("spec"), map.path("spec"));
  CnnModel m;
  m.spec.classes = static_cast<int>(classes);
  for (auto [key, field] : {std::pair<const char*, int*>{"image_size", &m.spec.image_size}, {"channels", &m.spec.channels},
                            {"width", &m.spec.width}, {"hidden", &m.spec.hidden}}) {
    const uint64_t v = spec.uint(key);
    check_limit(v, uint64_t{1} << 20, spec.path(key), "a CNN's spec");
    *field = static_cast<int>(v);
  }
  spec.finish();
  try {
    m.spec.validate(map.path("spec"));
  } catch (const InputError& e) {
    fail(ProtocolErrorCode::InvalidValue, e.what());
  }
  if (static_cast<uint64_t>(m.spec.pixels()) != dim)
    fail(ProtocolErrorCode::DimensionMismatch, map.path("spec") + ": a CNN of " + std::to_string(m.spec.pixels()) +
                                                   " pixels per image in a head of dimension " + std::to_string(dim));
  const TensorIn t = read_tensor(map.at("parameters"), map.path("parameters"));
  expect_shape(t, {static_cast<uint64_t>(m.spec.parameter_count())}, Layout::Dense);
  m.parameters.resize(static_cast<size_t>(m.spec.parameter_count()));
  unpack_tensor(t, m.parameters.data());
  return std::make_shared<CnnHead>(std::move(m));
}

}  // namespace

namespace wire {

namespace {

// What stands for the head's parameters: a model's spec and parameters (FedMITR's ViT, FGL's CNN),
// or the layers of a linear or adapter head.
void pack_head_parameters(Packer& pk, std::string& out, const Head& head) {
  if (const auto* vit = dynamic_cast<const VitHead*>(&head)) {
    pack_str(pk, "spec");
    pack_vit_spec(pk, vit->model().spec);
    pack_str(pk, "parameters");
    pack_tensor(pk, out, DType::F32, Layout::Dense, Shape{vit->model().parameters.size()}, vit->model().parameters.data(),
                "head.parameters");
  } else if (const auto* cnn = dynamic_cast<const CnnHead*>(&head)) {
    const CnnSpec& c = cnn->model().spec;
    pack_str(pk, "spec");
    pk.pack_map(4);
    for (auto [key, value] : {std::pair<const char*, int>{"image_size", c.image_size}, {"channels", c.channels},
                              {"width", c.width}, {"hidden", c.hidden}}) {
      pack_str(pk, key);
      pk.pack_uint32(static_cast<uint32_t>(value));
    }
    pack_str(pk, "parameters");
    pack_tensor(pk, out, DType::F32, Layout::Dense, Shape{cnn->model().parameters.size()}, cnn->model().parameters.data(),
                "head.parameters");
  } else if (const auto* linear = dynamic_cast<const LinearHead*>(&head)) {
    pack_str(pk, "layers");
    pk.pack_array(1);
    pack_layer(pk, out, linear->weights(), linear->bias(), "head.layers[0]");
  } else {
    pack_str(pk, "layers");
    const auto& layers = dynamic_cast<const AdapterHead&>(head).layers();
    pk.pack_array(static_cast<uint32_t>(layers.size()));
    for (size_t i = 0; i < layers.size(); ++i)
      pack_layer(pk, out, layers[i].W, layers[i].b, "head.layers[" + std::to_string(i) + "]");
  }
}

void pack_class_means(Packer& pk, std::string& out, const ClassMeans& means) {
  pack_str(pk, "class_means");
  pk.pack_map(2);
  pack_str(pk, "means");
  pack_tensor(pk, out, DType::F64, Layout::Dense, Shape{u(means.means.rows()), u(means.means.cols())}, means.means.data(),
              "head.class_means.means");
  pack_str(pk, "present");
  pk.pack_array(static_cast<uint32_t>(means.present.size()));
  for (bool p : means.present) p ? pk.pack_true() : pk.pack_false();
}

}  // namespace

void pack_head(Packer& pk, std::string& out, const HeadMessage& h) {
  if (!h.head) fail(ProtocolErrorCode::InvalidValue, "head: no head to send");
  if (h.contributors.empty()) fail(ProtocolErrorCode::InvalidValue, "head: names no contributors");
  const Head& head = *h.head;
  const bool model = dynamic_cast<const VitHead*>(&head) || dynamic_cast<const CnnHead*>(&head);
  if (!model && !dynamic_cast<const LinearHead*>(&head) && !dynamic_cast<const AdapterHead*>(&head))
    fail(ProtocolErrorCode::InvalidValue,
         "head: kind '" + head.kind() + "' cannot be sent (linear, lda, adapter, vit or cnn)");
  const ClassMeans* means = h.class_means.get();
  if (means && (means->means.rows() != head.num_classes() || means->means.cols() != head.dim() ||
                means->present.size() != static_cast<size_t>(head.num_classes())))
    fail(ProtocolErrorCode::DimensionMismatch, "head.class_means: not C x d for the head's C and d");
  pk.pack_map((means ? 7 : 6) + (model ? 1 : 0));  // a spec and parameters stand for the layers
  pack_str(pk, "kind");
  pack_str(pk, head.kind());
  pack_origin(pk, h.contributors, h.backbone_fingerprint, head.dim(), head.num_classes());
  pack_head_parameters(pk, out, head);
  if (means) pack_class_means(pk, out, *means);
}

HeadMessage read_head(const msgpack::object& o, const Limits& limits) {
  MapReader map(o, "head");
  HeadMessage h;
  const std::string kind = read_string(map.at("kind"), map.path("kind"));
  if (kind != "linear" && kind != "lda" && kind != "adapter" && kind != "vit" && kind != "cnn")
    fail(ProtocolErrorCode::InvalidValue, "head.kind: unknown head kind '" + printable(kind) +
                                              "' (linear, lda, adapter, vit or cnn)");
  h.contributors = read_contributors(map.at("contributors"), map.path("contributors"), limits);
  h.backbone_fingerprint = read_string(map.at("backbone"), map.path("backbone"));
  const uint64_t dim = static_cast<uint64_t>(read_count(map.at("dim"), map.path("dim"), limits.max_dim, "max_dim"));
  const uint64_t classes =
      static_cast<uint64_t>(read_count(map.at("classes"), map.path("classes"), limits.max_classes, "max_classes"));
  if (kind == "vit" || kind == "cnn") {
    h.head = kind == "vit" ? read_vit(map, dim, classes) : read_cnn(map, dim, classes);
    if (const msgpack::object* means = map.find("class_means")) h.class_means = read_class_means(*means, classes, dim);
    map.finish();
    return h;
  }
  const auto& layers = as_array(map.at("layers"), map.path("layers"));
  if (const msgpack::object* means = map.find("class_means")) h.class_means = read_class_means(*means, classes, dim);
  map.finish();
  const uint32_t expected_layers = kind == "adapter" ? 3 : 1;
  if (layers.size != expected_layers)
    fail(ProtocolErrorCode::DimensionMismatch, "head.layers: a " + kind + " head has " +
                                                   std::to_string(expected_layers) + " layers, found " +
                                                   std::to_string(layers.size));
  std::vector<AdapterHead::Layer> read;
  uint64_t in = dim;
  for (uint32_t i = 0; i < layers.size; ++i) {
    const bool last = i + 1 == layers.size;
    read.push_back(read_layer(layers.ptr[i], "head.layers[" + std::to_string(i) + "]", in, last ? classes : 0,
                              last ? limits.max_classes : limits.max_dim));
    in = static_cast<uint64_t>(read.back().W.rows());
  }
  try {
    if (kind == "adapter")
      h.head = std::make_shared<AdapterHead>(std::move(read));
    else
      h.head = std::make_shared<LinearHead>(kind, std::move(read[0].W), std::move(read[0].b));
  } catch (const std::exception& e) {
    fail(ProtocolErrorCode::InvalidValue, std::string("head: ") + e.what());
  }
  return h;
}

}  // namespace wire
}  // namespace fednode
