// Internal to protocol/: tensors on the wire. A tensor is a map
//   {"dtype": "f16"|"f32"|"f64", "shape": [dims...], "layout": "dense"|"upper", "data": bin}
// with little-endian IEEE 754 values in row-major order. "upper" stores each trailing n x n
// symmetric matrix as its upper triangle, row by row (n(n+1)/2 values), which halves full
// covariances and the FedCGS Gram matrix on the wire.
#pragma once

#include "protocol/msgpack_io.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace fednode::wire {

enum class DType : uint8_t { F16, F32, F64 };
enum class Layout : uint8_t { Dense, Upper };
const char* dtype_name(DType d);
size_t dtype_size(DType d);

// The value conversions of a message's tensors, collected while its structure is written or read
// and then run together on the worker pool (core/parallel.h): a FedPFT message of 200 tensors
// and 5 MB converts on every core instead of one. The outcome is the serial one: run() rethrows
// the failure of the earliest tensor, in message order, whichever thread met it first.
class TensorJobs {
 public:
  // `out_start` is where the job writes in the string being encoded (0 when decoding).
  void add(std::function<void()> convert, uint64_t bytes, uint64_t out_start = 0);
  // Runs every job not run yet, together on the pool.
  void run();
  // For an encoding that is sealed as it is written (a version-2 stream): runs every job not run
  // yet that writes below `end`, together on the pool when they write a quarter megabyte or more. A
  // job that fails throws (the earliest in message order), and the jobs after it stay unrun.
  void run_through(uint64_t end);
  bool empty() const { return next_ == jobs_.size(); }

 private:
  std::vector<std::function<void()>> jobs_;
  std::vector<uint64_t> starts_, sizes_;
  size_t next_ = 0;
  uint64_t bytes_ = 0;
};

// `values` holds prod(shape) values in row-major order; for Layout::Upper that is complete
// symmetric matrices, of which only the upper triangles are written. Throws ProtocolError:
// NonFinite for NaN/Inf and for values that overflow the dtype; InvalidValue, when `positive`
// is set (variances), for a value not above 0 or one that becomes 0 in float16.
// `out` is the string the packer appends to: the data is converted straight into it, at once or,
// with `deferred`, when deferred->run() is called (`values` and `out` must live until then;
// `out` may grow meanwhile).
template <typename T>
void pack_tensor(Packer& pk, std::string& out, DType dtype, Layout layout,
                 const std::vector<uint64_t>& shape, const T* values, const std::string& path,
                 bool positive = false, TensorJobs* deferred = nullptr);

struct TensorIn {
  DType dtype = DType::F32;
  Layout layout = Layout::Dense;
  std::vector<uint64_t> shape;
  std::string_view data;  // exactly the bytes the shape, layout and dtype call for
  std::string path;
  uint64_t elements() const;  // prod(shape), as unpacked
};

// Reads the map and checks that the data length matches shape, layout and dtype; allocates
// nothing proportional to the claimed shape.
TensorIn read_tensor(const msgpack::object& o, const std::string& path);
// DimensionMismatch unless the tensor has exactly this shape and layout.
void expect_shape(const TensorIn& t, const std::vector<uint64_t>& shape, Layout layout);
// WrongType unless the tensor has this dtype.
void expect_dtype(const TensorIn& t, DType dtype);
// Writes t.elements() values into `out` (mirroring symmetric matrices); NonFinite on NaN/Inf,
// including values that overflow T; with `positive` (variances), InvalidValue for a value not
// above 0, found in the same pass. With `deferred`, the conversion waits for deferred->run().
template <typename T>
void unpack_tensor(const TensorIn& t, T* out, TensorJobs* deferred = nullptr, bool positive = false);

std::string shape_string(const std::vector<uint64_t>& shape);

}  // namespace fednode::wire
