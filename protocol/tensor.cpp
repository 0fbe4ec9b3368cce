#include "protocol/tensor.h"

#include "protocol/half.h"

#include "core/parallel.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace fednode::wire {
namespace {

constexpr size_t kMaxDims = 3;
constexpr size_t kNone = SIZE_MAX;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr bool kLittleEndian = true;
#else
constexpr bool kLittleEndian = false;
#endif

template <typename U>
void store_le(char* p, U v) {
  if constexpr (kLittleEndian) {
    std::memcpy(p, &v, sizeof(U));
  } else {
    for (size_t i = 0; i < sizeof(U); ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  }
}

template <typename U>
U load_le(const char* p) {
  U v = 0;
  if constexpr (kLittleEndian) {
    std::memcpy(&v, p, sizeof(U));
  } else {
    for (size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

// Converting a double beyond float's range is undefined behaviour, so range-check first.
bool fits_float(double v) { return std::fabs(v) <= static_cast<double>(FLT_MAX); }

// Why one value cannot be encoded or decoded.
enum class Bad { None, NonFinite, Overflow, Underflow, NotPositive };

struct Failure {
  size_t at = kNone;
  Bad why = Bad::None;
};

// Converts n source values into wire bytes. Returns the first value that cannot travel:
// NaN/Inf, beyond the target's range, or (with `positive`) a value not above 0 or one that
// becomes 0. The checking loop runs only after the fast loop, which has no early exit so that
// the compiler can vectorise it, has seen a problem.
template <typename T>
Failure find_encode_failure(const T* src, size_t n, DType dtype, bool positive) {
  for (size_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(src[i]);
    if (!std::isfinite(v)) return {i, Bad::NonFinite};
    if (positive && !(v > 0)) return {i, Bad::NotPositive};
    if (dtype == DType::F64) continue;
    if (!fits_float(v)) return {i, Bad::Overflow};
    if (dtype == DType::F32) continue;
    const uint16_t h = fast_float_to_half(static_cast<float>(src[i]));
    if ((h & 0x7C00u) == 0x7C00u) return {i, Bad::Overflow};
    if (positive && (h & 0x7FFFu) == 0) return {i, Bad::Underflow};
  }
  return {};
}

// Clamping first keeps the double-to-float conversion defined; clamped values are refused anyway.
template <typename T>
float clamped_float(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    const double lim = static_cast<double>(FLT_MAX);
    return static_cast<float>(v < -lim ? -lim : (v > lim ? lim : v));
  }
}

// Whether v breaks the rule of its tensor: `positive` (variances) asks for v > 0 (false for NaN).
template <typename T>
bool breaks(T v, bool positive) {
  return positive && !(v > 0);
}

template <typename T>
Failure encode_run(char* dst, const T* src, size_t n, DType dtype, bool positive) {
  bool bad = false;
  switch (dtype) {
    case DType::F64:
      if constexpr (std::is_same_v<T, double> && kLittleEndian) {
        std::memcpy(dst, src, 8 * n);
        for (size_t i = 0; i < n; ++i) bad |= !std::isfinite(src[i]) || breaks(src[i], positive);
      } else {
        for (size_t i = 0; i < n; ++i) {
          const double v = static_cast<double>(src[i]);
          bad |= !std::isfinite(v) || breaks(v, positive);
          uint64_t u;
          std::memcpy(&u, &v, 8);
          store_le<uint64_t>(dst + 8 * i, u);
        }
      }
      break;
    case DType::F32:
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u = float_bits(clamped_float(src[i]));
        // NaN keeps its exponent through the clamp; Inf and overflow are caught by the range test.
        bad |= (u & 0x7F800000u) == 0x7F800000u || std::fabs(static_cast<double>(src[i])) > static_cast<double>(FLT_MAX) ||
               breaks(src[i], positive);
        store_le<uint32_t>(dst + 4 * i, u);
      }
      break;
    case DType::F16:
      if constexpr (std::is_same_v<T, double>) bad = doubles_to_halves(src, dst, n, positive);
      else bad = floats_to_halves(src, dst, n, positive);
      break;
  }
  return bad ? find_encode_failure(src, n, dtype, positive) : Failure{};
}

template <typename T>
Failure find_decode_failure(const char* src, size_t n, DType dtype, bool positive) {
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (dtype) {
      case DType::F64: {
        const uint64_t u = load_le<uint64_t>(src + 8 * i);
        std::memcpy(&v, &u, 8);
        break;
      }
      case DType::F32: v = bits_float(load_le<uint32_t>(src + 4 * i)); break;
      case DType::F16: v = fast_half_to_float(load_le<uint16_t>(src + 2 * i)); break;
    }
    if (!std::isfinite(v)) return {i, Bad::NonFinite};
    if (sizeof(T) < sizeof(double) && !fits_float(v)) return {i, Bad::Overflow};
    if (positive && !(v > 0)) return {i, Bad::NotPositive};
  }
  return {};
}

// The inverse: n wire values into T. Returns the first NaN/Inf, value beyond T's range or (with
// `positive`) value not above 0.
template <typename T>
Failure decode_run(T* dst, const char* src, size_t n, DType dtype, bool positive) {
  bool bad = false;
  switch (dtype) {
    case DType::F64:
      if constexpr (std::is_same_v<T, double> && kLittleEndian) {
        std::memcpy(dst, src, 8 * n);
        for (size_t i = 0; i < n; ++i) bad |= !std::isfinite(dst[i]) || breaks(dst[i], positive);
      } else {
        for (size_t i = 0; i < n; ++i) {
          const uint64_t u = load_le<uint64_t>(src + 8 * i);
          double v;
          std::memcpy(&v, &u, 8);
          if constexpr (std::is_same_v<T, double>) {
            bad |= !std::isfinite(v) || breaks(v, positive);
            dst[i] = v;
          } else {
            bad |= !(std::fabs(v) <= static_cast<double>(FLT_MAX)) || breaks(v, positive);  // also true for NaN
            dst[i] = clamped_float(v);
          }
        }
      }
      break;
    case DType::F32:
      for (size_t i = 0; i < n; ++i) {
        const uint32_t u = load_le<uint32_t>(src + 4 * i);
        // As a signed integer a float's bits are above 0 exactly for the positive floats.
        bad |= (u & 0x7F800000u) == 0x7F800000u || (positive && static_cast<int32_t>(u) <= 0);
        dst[i] = static_cast<T>(bits_float(u));
      }
      break;
    case DType::F16:
      if constexpr (std::is_same_v<T, double>) bad = halves_to_doubles(src, dst, n, positive);
      else bad = halves_to_floats(src, dst, n, positive);
      break;
  }
  return bad ? find_decode_failure<T>(src, n, dtype, positive) : Failure{};
}

[[noreturn]] void refuse(const std::string& path, uint64_t index, Bad why, DType dtype, bool decoding) {
  const std::string at = path + ": element " + std::to_string(index);
  switch (why) {
    case Bad::Overflow:
      throw ProtocolError(ProtocolErrorCode::NonFinite,
                          at + (decoding ? " overflows float32" : std::string(" overflows ") + dtype_name(dtype)));
    case Bad::Underflow:
      throw ProtocolError(ProtocolErrorCode::InvalidValue,
                          at + " is positive but underflows float16 to 0; transfer in float32");
    case Bad::NotPositive:
      throw ProtocolError(ProtocolErrorCode::InvalidValue, at + " is not positive (a variance must be)");
    default:
      throw ProtocolError(ProtocolErrorCode::NonFinite, at + " is NaN or Inf");
  }
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
void pack_tensor(Packer& pk, std::string& out, DType dtype, Layout layout, const std::vector<uint64_t>& shape,
                 const T* values, const std::string& path, bool positive, TensorJobs* deferred) {
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
  auto convert = [&out, start, dtype, layout, shape, values, path, positive, count] {
    char* p = out.data() + start;
    if (layout == Layout::Dense) {
      const Failure f = encode_run(p, values, count, dtype, positive);
      if (f.at != kNone) refuse(path, f.at, f.why, dtype, false);
      return;
    }
    // Each row of the upper triangle is contiguous in the row-major source.
    const size_t size = dtype_size(dtype);
    const uint64_t n = shape.back();
    const uint64_t matrices = shape.size() > 2 ? shape[0] : 1;
    for (uint64_t m = 0; m < matrices; ++m)
      for (uint64_t r = 0; r < n; ++r) {
        const uint64_t first = (m * n + r) * n + r;
        const Failure f = encode_run(p, values + first, n - r, dtype, positive);
        if (f.at != kNone) refuse(path, first + f.at, f.why, dtype, false);
        p += (n - r) * size;
      }
  };
  if (deferred) deferred->add(std::move(convert), bytes, start);
  else convert();
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
void unpack_tensor(const TensorIn& t, T* out, TensorJobs* deferred, bool positive) {
  auto convert = [t, out, positive] {
    const char* p = t.data.data();
    if (t.layout == Layout::Dense) {
      const Failure f = decode_run(out, p, t.elements(), t.dtype, positive);
      if (f.at != kNone) refuse(t.path, f.at, f.why, t.dtype, true);
      return;
    }
    const size_t size = dtype_size(t.dtype);
    const uint64_t n = t.shape.back();
    const uint64_t matrices = t.shape.size() > 2 ? t.shape[0] : 1;
    for (uint64_t m = 0; m < matrices; ++m) {
      T* mat = out + m * n * n;
      for (uint64_t r = 0; r < n; ++r) {
        const Failure f = decode_run(mat + r * n + r, p, n - r, t.dtype, positive);
        if (f.at != kNone) refuse(t.path, (m * n + r) * n + r + f.at, f.why, t.dtype, true);
        p += (n - r) * size;
      }
      for (uint64_t r = 1; r < n; ++r)
        for (uint64_t c = 0; c < r; ++c) mat[r * n + c] = mat[c * n + r];
    }
  };
  if (deferred) deferred->add(std::move(convert), t.elements() * sizeof(T));
  else convert();
}

// Below this many bytes written, waking the workers costs more than the conversion.
constexpr uint64_t kParallelConversionBytes = uint64_t{1} << 20;

void TensorJobs::add(std::function<void()> convert, uint64_t bytes, uint64_t out_start) {
  jobs_.push_back(std::move(convert));
  starts_.push_back(out_start);
  sizes_.push_back(bytes);
  bytes_ += bytes;
}

void TensorJobs::run() {
  const size_t first = next_;
  for_each_chunk_ordered(jobs_.size() - first, bytes_ >= kParallelConversionBytes,
                         [&](size_t i) { jobs_[first + i](); });
  jobs_.clear();
  starts_.clear();
  sizes_.clear();
  next_ = 0;
  bytes_ = 0;
}

void TensorJobs::run_through(uint64_t end) {
  size_t last = next_;
  uint64_t bytes = 0;
  for (; last < jobs_.size() && starts_[last] < end; ++last) bytes += sizes_[last];
  const size_t first = next_;
  next_ = last;  // also when one fails: the payload is of no use then
  // A batch of chunks is a fraction of a message: worth the workers from a quarter megabyte.
  for_each_chunk_ordered(last - first, bytes >= kParallelConversionBytes / 4, [&](size_t i) {
    jobs_[first + i]();
    jobs_[first + i] = nullptr;  // its captures (a path string, a shape) are not needed again
  });
}

template void pack_tensor<float>(Packer&, std::string&, DType, Layout, const std::vector<uint64_t>&,
                                 const float*, const std::string&, bool, TensorJobs*);
template void pack_tensor<double>(Packer&, std::string&, DType, Layout, const std::vector<uint64_t>&,
                                  const double*, const std::string&, bool, TensorJobs*);
template void unpack_tensor<float>(const TensorIn&, float*, TensorJobs*, bool);
template void unpack_tensor<double>(const TensorIn&, double*, TensorJobs*, bool);

}  // namespace fednode::wire
