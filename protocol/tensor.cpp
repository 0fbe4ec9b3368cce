#include "protocol/tensor.h"

#include "methods/float16.h"

#include <cfloat>
#include <cmath>
#include <cstring>

namespace fednode::wire {
namespace {

constexpr size_t kMaxDims = 3;

template <typename U>
void store_le(char* p, U v) {
  for (size_t i = 0; i < sizeof(U); ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

template <typename U>
U load_le(const char* p) {
  U v = 0;
  for (size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

[[noreturn]] void non_finite(const std::string& path, uint64_t index, double v, DType dtype) {
  const bool finite = std::isfinite(v);
  throw ProtocolError(ProtocolErrorCode::NonFinite,
                      path + ": element " + std::to_string(index) +
                          (finite ? " (" + std::to_string(v) + ") overflows " + dtype_name(dtype)
                                  : std::string(" is NaN or Inf")));
}

// Converting a double beyond float's range is undefined behaviour, so range-check first.
bool fits_float(double v) { return std::fabs(v) <= static_cast<double>(FLT_MAX); }

template <typename T>
void write_value(char* p, DType dtype, T v, const std::string& path, uint64_t index) {
  if (!std::isfinite(v)) non_finite(path, index, static_cast<double>(v), dtype);
  switch (dtype) {
    case DType::F16: {
      if (!fits_float(static_cast<double>(v))) non_finite(path, index, static_cast<double>(v), dtype);
      const uint16_t h = float_to_half(static_cast<float>(v));
      if ((h & 0x7C00u) == 0x7C00u) non_finite(path, index, static_cast<double>(v), dtype);
      store_le<uint16_t>(p, h);
      return;
    }
    case DType::F32: {
      if (!fits_float(static_cast<double>(v))) non_finite(path, index, static_cast<double>(v), dtype);
      const float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      store_le<uint32_t>(p, u);
      return;
    }
    case DType::F64: {
      const double d = static_cast<double>(v);
      uint64_t u;
      std::memcpy(&u, &d, 8);
      store_le<uint64_t>(p, u);
      return;
    }
  }
}

double read_value(const char* p, DType dtype) {
  switch (dtype) {
    case DType::F16: return half_to_float(load_le<uint16_t>(p));
    case DType::F32: {
      const uint32_t u = load_le<uint32_t>(p);
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DType::F64: {
      const uint64_t u = load_le<uint64_t>(p);
      double d;
      std::memcpy(&d, &u, 8);
      return d;
    }
  }
  return 0;
}

// Number of values stored for a tensor of this shape and layout, or TooLarge.
uint64_t stored_count(const std::vector<uint64_t>& shape, Layout layout, const std::string& path) {
  uint64_t count = 1;
  if (layout == Layout::Dense) {
    for (uint64_t s : shape) count = checked_mul(count, s, path);
    return count;
  }
  const uint64_t n = shape.back();
  for (size_t i = 0; i + 2 < shape.size(); ++i) count = checked_mul(count, shape[i], path);
  return checked_mul(count, n % 2 == 0 ? (n / 2) * (n + 1) : n * ((n + 1) / 2), path);
}

}  // namespace

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F16: return "f16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
  }
  return "?";
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::F16: return 2;
    case DType::F32: return 4;
    case DType::F64: return 8;
  }
  return 0;
}

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t TensorIn::elements() const {
  uint64_t n = 1;
  for (uint64_t s : shape) n *= s;  // read_tensor proved this does not overflow
  return n;
}

template <typename T>
void pack_tensor(Packer& pk, std::string& out, DType dtype, Layout layout,
                 const std::vector<uint64_t>& shape, const T* values, const std::string& path) {
  const uint64_t count = stored_count(shape, layout, path);
  const uint64_t bytes = checked_mul(count, dtype_size(dtype), path);
  if (bytes > UINT32_MAX)
    throw ProtocolError(ProtocolErrorCode::TooLarge, path + ": tensor of " + std::to_string(bytes) +
                                                         " bytes exceeds MessagePack's 4 GiB binary");
  pk.pack_map(4);
  pack_str(pk, "dtype");
  pack_str(pk, dtype_name(dtype));
  pack_str(pk, "shape");
  pk.pack_array(static_cast<uint32_t>(shape.size()));
  for (uint64_t s : shape) pk.pack_uint64(s);
  pack_str(pk, "layout");
  pack_str(pk, layout == Layout::Dense ? "dense" : "upper");
  pack_str(pk, "data");
  pk.pack_bin(static_cast<uint32_t>(bytes));
  const size_t start = out.size();
  out.resize(start + bytes);
  char* p = out.data() + start;
  const size_t size = dtype_size(dtype);
  if (layout == Layout::Dense) {
    for (uint64_t i = 0; i < count; ++i, p += size) write_value(p, dtype, values[i], path, i);
    return;
  }
  const uint64_t n = shape.back();
  const uint64_t matrices = shape.size() > 2 ? shape[0] : 1;
  for (uint64_t m = 0; m < matrices; ++m)
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t c = r; c < n; ++c, p += size) {
        const uint64_t index = (m * n + r) * n + c;
        write_value(p, dtype, values[index], path, index);
      }
}

TensorIn read_tensor(const msgpack::object& o, const std::string& path) {
  MapReader map(o, path);
  TensorIn t;
  t.path = path;
  const std::string_view dtype = map.str("dtype");
  if (dtype == "f16") t.dtype = DType::F16;
  else if (dtype == "f32") t.dtype = DType::F32;
  else if (dtype == "f64") t.dtype = DType::F64;
  else
    throw ProtocolError(ProtocolErrorCode::InvalidValue,
                        map.path("dtype") + ": unknown dtype '" + printable(dtype) + "' (f16, f32 or f64)");
  const auto& shape = as_array(map.at("shape"), map.path("shape"));
  if (shape.size == 0 || shape.size > kMaxDims)
    throw ProtocolError(ProtocolErrorCode::InvalidValue,
                        map.path("shape") + ": a tensor has 1 to 3 dimensions, found " +
                            std::to_string(shape.size));
  for (uint32_t i = 0; i < shape.size; ++i) {
    const uint64_t s = as_uint(shape.ptr[i], map.path("shape") + "[" + std::to_string(i) + "]");
    check_limit(s, UINT32_MAX, map.path("shape"), "2^32-1 per dimension");
    t.shape.push_back(s);
  }
  const std::string_view layout = map.str("layout");
  if (layout == "dense") {
    t.layout = Layout::Dense;
  } else if (layout == "upper") {
    t.layout = Layout::Upper;
    if (t.shape.size() < 2 || t.shape[t.shape.size() - 1] != t.shape[t.shape.size() - 2])
      throw ProtocolError(ProtocolErrorCode::DimensionMismatch,
                          path + ": layout 'upper' needs square trailing dimensions, shape is " +
                              shape_string(t.shape));
  } else {
    throw ProtocolError(ProtocolErrorCode::InvalidValue,
                        map.path("layout") + ": unknown layout '" + printable(layout) + "' (dense or upper)");
  }
  t.data = as_bin(map.at("data"), map.path("data"));
  map.finish();
  uint64_t total = 1;
  for (uint64_t s : t.shape) total = checked_mul(total, s, path);  // elements() relies on this
  const uint64_t expected = checked_mul(stored_count(t.shape, t.layout, path), dtype_size(t.dtype), path);
  if (t.data.size() != expected)
    throw ProtocolError(ProtocolErrorCode::DimensionMismatch,
                        path + ": " + std::to_string(t.data.size()) + " data bytes, but shape " +
                            shape_string(t.shape) + " (" + std::string(layout) + ", " + dtype_name(t.dtype) +
                            ") needs " + std::to_string(expected));
  return t;
}

void expect_shape(const TensorIn& t, const std::vector<uint64_t>& shape, Layout layout) {
  if (t.shape != shape || t.layout != layout)
    throw ProtocolError(ProtocolErrorCode::DimensionMismatch,
                        t.path + ": expected shape " + shape_string(shape) +
                            (layout == Layout::Upper ? " (upper)" : " (dense)") + ", found " +
                            shape_string(t.shape) + (t.layout == Layout::Upper ? " (upper)" : " (dense)"));
}

void expect_dtype(const TensorIn& t, DType dtype) {
  if (t.dtype != dtype)
    throw ProtocolError(ProtocolErrorCode::WrongType,
                        t.path + ": must be " + dtype_name(dtype) + ", found " + dtype_name(t.dtype));
}

template <typename T>
void unpack_tensor(const TensorIn& t, T* out) {
  const size_t size = dtype_size(t.dtype);
  const char* p = t.data.data();
  auto read = [&](uint64_t index) -> T {
    const double v = read_value(p, t.dtype);
    p += size;
    if (!std::isfinite(v))
      throw ProtocolError(ProtocolErrorCode::NonFinite,
                          t.path + ": element " + std::to_string(index) + " is NaN or Inf");
    if (sizeof(T) < sizeof(double) && !fits_float(v))
      throw ProtocolError(ProtocolErrorCode::NonFinite,
                          t.path + ": element " + std::to_string(index) + " overflows float32");
    return static_cast<T>(v);
  };
  if (t.layout == Layout::Dense) {
    const uint64_t n = t.elements();
    for (uint64_t i = 0; i < n; ++i) out[i] = read(i);
    return;
  }
  const uint64_t n = t.shape.back();
  const uint64_t matrices = t.shape.size() > 2 ? t.shape[0] : 1;
  for (uint64_t m = 0; m < matrices; ++m) {
    T* mat = out + m * n * n;
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t c = r; c < n; ++c) {
        const T v = read((m * n + r) * n + c);
        mat[r * n + c] = v;
        mat[c * n + r] = v;
      }
  }
}

template void pack_tensor<float>(Packer&, std::string&, DType, Layout, const std::vector<uint64_t>&,
                                 const float*, const std::string&);
template void pack_tensor<double>(Packer&, std::string&, DType, Layout, const std::vector<uint64_t>&,
                                  const double*, const std::string&);
template void unpack_tensor<float>(const TensorIn&, float*);
template void unpack_tensor<double>(const TensorIn&, double*);

}  // namespace fednode::wire
