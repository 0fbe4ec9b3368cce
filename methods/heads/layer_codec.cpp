#include "methods/heads/layer_codec.h"

#include "methods/heads/head_format.h"

namespace fednode {
namespace {

void write_layer(BodyWriter& w, const MatrixF& W, const VectorF& b, const std::string& at) {
  if (b.size() != W.rows())
    wire_fail(ProtocolErrorCode::DimensionMismatch, at + ": bias of " + std::to_string(b.size()) + " for " +
                                                        std::to_string(W.rows()) + " outputs");
  w.map(2);
  w.text("W");
  w.tensor(WireFloat::F32, WireLayout::Dense,
           WireShape{static_cast<uint64_t>(W.rows()), static_cast<uint64_t>(W.cols())}, W.data(), at + ".W");
  w.text("b");
  w.tensor(WireFloat::F32, WireLayout::Dense, WireShape{static_cast<uint64_t>(b.size())}, b.data(), at + ".b");
}

// One layer whose input width is known; its output width comes from W's shape, bounded by
// `max_out` before anything is allocated. `expected_out` > 0 pins it (the class count).
AdapterHead::Layer read_layer(BodyValue& m, uint64_t in, uint64_t expected_out, uint64_t max_out, BodyReader& r) {
  const BodyTensor W = m.at("W")->tensor();
  const BodyTensor b = m.at("b")->tensor();
  m.finish();
  if (W.shape.size() != 2)
    wire_fail(ProtocolErrorCode::DimensionMismatch, W.path + ": must be two-dimensional, shape is " + shape_text(W.shape));
  const uint64_t out = W.shape[0];
  if (expected_out > 0 && out != expected_out)
    wire_fail(ProtocolErrorCode::DimensionMismatch, W.path + ": " + std::to_string(out) + " outputs, expected " +
                                                        std::to_string(expected_out));
  if (out == 0) wire_fail(ProtocolErrorCode::InvalidValue, W.path + ": layer has no outputs");
  check_limit(out, max_out, W.path, "max_dim");
  r.expect_shape(W, {out, in}, WireLayout::Dense);
  r.expect_shape(b, {out}, WireLayout::Dense);
  AdapterHead::Layer layer;
  layer.W.resize(static_cast<Eigen::Index>(out), static_cast<Eigen::Index>(in));
  layer.b.resize(static_cast<Eigen::Index>(out));
  r.unpack(W, layer.W.data());
  r.unpack(b, layer.b.data());
  return layer;
}

}  // namespace

void LayerCodec::write(const Head& head, BodyWriter& w) const {
  w.text("layers");
  if (const auto* linear = dynamic_cast<const LinearHead*>(&head)) {
    w.array(1);
    write_layer(w, linear->weights(), linear->bias(), "head.layers[0]");
    return;
  }
  const auto& layers = dynamic_cast<const AdapterHead&>(head).layers();
  w.array(static_cast<uint32_t>(layers.size()));
  for (size_t i = 0; i < layers.size(); ++i) write_layer(w, layers[i].W, layers[i].b, "head.layers[" + std::to_string(i) + "]");
}

std::shared_ptr<const Head> LayerCodec::read(const std::string& kind, BodyValue& map, uint64_t dim, uint64_t classes,
                                             BodyReader& r, const std::function<void()>& rest) const {
  const auto layers = map.at("layers");
  const uint32_t n = layers->items();
  rest();
  const uint32_t expected_layers = kind == "adapter" ? 3 : 1;
  if (n != expected_layers)
    wire_fail(ProtocolErrorCode::DimensionMismatch, "head.layers: a " + kind + " head has " +
                                                        std::to_string(expected_layers) + " layers, found " +
                                                        std::to_string(n));
  std::vector<AdapterHead::Layer> read;
  uint64_t in = dim;
  for (uint32_t i = 0; i < n; ++i) {
    const bool last = i + 1 == n;
    read.push_back(read_layer(*layers->item(i), in, last ? classes : 0,
                              last ? r.limits().max_classes : r.limits().max_dim, r));
    in = static_cast<uint64_t>(read.back().W.rows());
  }
  try {
    if (kind == "adapter") return std::make_shared<AdapterHead>(std::move(read));
    return std::make_shared<LinearHead>(kind, std::move(read[0].W), std::move(read[0].b));
  } catch (const std::exception& e) {
    wire_fail(ProtocolErrorCode::InvalidValue, std::string("head: ") + e.what());
  }
}

std::unique_ptr<Head> LayerCodec::load(const std::string& kind, std::istream& in, const std::string& where) const {
  using head_format::read_matrix;
  using head_format::read_vector;
  if (kind != "adapter") {
    MatrixF W = read_matrix(in, where);
    VectorF b = read_vector(in, where);
    if (b.size() != W.rows()) throw InputError(where + ": bias size does not match weights");
    return std::make_unique<LinearHead>(kind, std::move(W), std::move(b));
  }
  std::vector<AdapterHead::Layer> layers(3);
  for (auto& layer : layers) {
    layer.W = read_matrix(in, where);
    layer.b = read_vector(in, where);
  }
  return std::make_unique<AdapterHead>(std::move(layers));
}

}  // namespace fednode
