#include "protocol/wire_body_msgpack.h"

namespace fednode::wire {
namespace {

Layout layout_of(WireLayout l) { return l == WireLayout::Upper ? Layout::Upper : Layout::Dense; }
WireLayout wire_layout_of(Layout l) { return l == Layout::Upper ? WireLayout::Upper : WireLayout::Dense; }

TensorIn tensor_in(const BodyTensor& t) {
  TensorIn in;
  in.dtype = dtype_of(t.dtype);
  in.layout = layout_of(t.layout);
  in.shape = t.shape;
  in.data = t.data;
  in.path = t.path;
  return in;
}

}  // namespace

DType dtype_of(WireFloat f) { return f == WireFloat::F16 ? DType::F16 : f == WireFloat::F64 ? DType::F64 : DType::F32; }
WireFloat wire_float_of(DType d) {
  return d == DType::F16 ? WireFloat::F16 : d == DType::F64 ? WireFloat::F64 : WireFloat::F32;
}

void MsgpackBodyWriter::tensor(WireFloat dtype, WireLayout layout, const WireShape& shape, const double* values,
                               const std::string& path, bool positive) {
  pack_tensor(pk_, out_, dtype_of(dtype), layout_of(layout), shape, values, path, positive, &jobs_);
}

void MsgpackBodyWriter::tensor(WireFloat dtype, WireLayout layout, const WireShape& shape, const float* values,
                               const std::string& path, bool positive) {
  pack_tensor(pk_, out_, dtype_of(dtype), layout_of(layout), shape, values, path, positive, &jobs_);
}

MapReader& MsgpackBodyValue::map() {
  if (shared_) return *shared_;
  if (!map_) map_.emplace(o_, path_);
  return *map_;
}

std::unique_ptr<BodyValue> MsgpackBodyValue::at(const char* key) {
  return std::make_unique<MsgpackBodyValue>(map().at(key), map().path(key));
}

std::unique_ptr<BodyValue> MsgpackBodyValue::find(const char* key) {
  const msgpack::object* o = map().find(key);
  return o ? std::make_unique<MsgpackBodyValue>(*o, map().path(key)) : nullptr;
}

std::unique_ptr<BodyValue> MsgpackBodyValue::item(uint32_t i) {
  const auto& a = as_array(o_, path_);
  return std::make_unique<MsgpackBodyValue>(a.ptr[i], path_ + "[" + std::to_string(i) + "]");
}

std::string MsgpackBodyValue::text() { return std::string(as_str(o_, path_)); }

BodyTensor MsgpackBodyValue::tensor() {
  const TensorIn in = read_tensor(o_, path_);
  BodyTensor t;
  t.dtype = wire_float_of(in.dtype);
  t.layout = wire_layout_of(in.layout);
  t.shape = in.shape;
  t.path = in.path;
  t.data = in.data;
  return t;
}

void MsgpackBodyReader::expect_shape(const BodyTensor& t, const WireShape& shape, WireLayout layout) const {
  wire::expect_shape(tensor_in(t), shape, layout_of(layout));
}

void MsgpackBodyReader::expect_dtype(const BodyTensor& t, WireFloat dtype) const {
  wire::expect_dtype(tensor_in(t), dtype_of(dtype));
}

void MsgpackBodyReader::unpack(const BodyTensor& t, double* out, bool positive) {
  unpack_tensor(tensor_in(t), out, deferred_ ? &jobs_ : nullptr, positive);
}
void MsgpackBodyReader::unpack(const BodyTensor& t, float* out, bool positive) {
  unpack_tensor(tensor_in(t), out, deferred_ ? &jobs_ : nullptr, positive);
}

}  // namespace fednode::wire
