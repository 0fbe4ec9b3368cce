// Internal to protocol/: methods/wire_body.h over the bounded MessagePack of protocol/msgpack_io.h
// and the tensors of protocol/tensor.h, so that a method's codec, in its own folder, writes and
// reads exactly the bytes, with exactly the checks and error paths, that protocol/ does.
#pragma once

#include "methods/wire_body.h"
#include "protocol/msgpack_io.h"
#include "protocol/tensor.h"

#include <memory>
#include <optional>
#include <string>

namespace fednode::wire {

DType dtype_of(WireFloat f);
WireFloat wire_float_of(DType d);

class MsgpackBodyWriter final : public BodyWriter {
 public:
  // `floats`: how knowledge tensors travel in this message. Tensor values are converted by `jobs`.
  MsgpackBodyWriter(Packer& pk, std::string& out, DType floats, TensorJobs& jobs)
      : pk_(pk), out_(out), floats_(floats), jobs_(jobs) {}
  void map(uint32_t entries) override { pk_.pack_map(entries); }
  void array(uint32_t items) override { pk_.pack_array(items); }
  void text(std::string_view s) override { pack_str(pk_, s); }
  void uint(uint64_t v) override { pk_.pack_uint64(v); }
  void integer(int64_t v) override { pk_.pack_int64(v); }
  void real(double v) override { pk_.pack_double(v); }
  void bytes(std::string_view b) override { pack_bin(pk_, b); }
  void tensor(WireFloat dtype, WireLayout layout, const WireShape& shape, const double* values, const std::string& path,
              bool positive) override;
  void tensor(WireFloat dtype, WireLayout layout, const WireShape& shape, const float* values, const std::string& path,
              bool positive) override;
  WireFloat floats() const override { return wire_float_of(floats_); }

 private:
  Packer& pk_;
  std::string& out_;
  DType floats_;
  TensorJobs& jobs_;
};

class MsgpackBodyValue final : public BodyValue {
 public:
  MsgpackBodyValue(const msgpack::object& o, std::string path) : o_(o), path_(std::move(path)) {}
  // A map read partly by the caller already, through `shared`: the keys either side asks for
  // count for both, so that the caller's finish() accepts the codec's.
  MsgpackBodyValue(const msgpack::object& o, std::string path, MapReader& shared)
      : o_(o), path_(std::move(path)), shared_(&shared) {}
  const std::string& path() const override { return path_; }
  std::unique_ptr<BodyValue> at(const char* key) override;
  std::unique_ptr<BodyValue> find(const char* key) override;
  void finish() override { map().finish(); }
  uint32_t items() override { return as_array(o_, path_).size; }
  std::unique_ptr<BodyValue> item(uint32_t i) override;
  uint64_t uint() override { return as_uint(o_, path_); }
  int64_t integer() override { return as_int(o_, path_); }
  double real() override { return as_float64(o_, path_); }
  std::string_view bytes() override { return as_bin(o_, path_); }
  std::string text() override;
  BodyTensor tensor() override;

 private:
  MapReader& map();
  const msgpack::object& o_;
  std::string path_;
  std::optional<MapReader> map_;  // made when first read as a map: MapReader refuses anything else
  MapReader* shared_ = nullptr;
};

class MsgpackBodyReader final : public BodyReader {
 public:
  // `deferred`: values are converted by run(), together on the pool (knowledge, whose buffers
  // stay where they are); otherwise at once (heads, whose constructors may copy them).
  explicit MsgpackBodyReader(const Limits& limits, bool deferred = true) : limits_(limits), deferred_(deferred) {}
  const Limits& limits() const override { return limits_; }
  void expect_shape(const BodyTensor& t, const WireShape& shape, WireLayout layout) const override;
  void expect_dtype(const BodyTensor& t, WireFloat dtype) const override;
  void unpack(const BodyTensor& t, double* out, bool positive) override;
  void unpack(const BodyTensor& t, float* out, bool positive) override;
  // Converts every tensor's values, together on the worker pool.
  void run() { jobs_.run(); }

 private:
  const Limits& limits_;
  bool deferred_;
  TensorJobs jobs_;
};

}  // namespace fednode::wire
