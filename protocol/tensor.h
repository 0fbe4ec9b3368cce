// Internal to protocol/: tensors on the wire. A tensor is a map
//   {"dtype": "f16"|"f32"|"f64", "shape": [dims...], "layout": "dense"|"upper", "data": bin}
// with little-endian IEEE 754 values in row-major order. "upper" stores each trailing n x n
// symmetric matrix as its upper triangle, row by row (n(n+1)/2 values), which halves full
// covariances and the FedCGS Gram matrix on the wire.
#pragma once

#include "protocol/msgpack_io.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fednode::wire {

enum class DType : uint8_t { F16, F32, F64 };
enum class Layout : uint8_t { Dense, Upper };
const char* dtype_name(DType d);
size_t dtype_size(DType d);

// `values` holds prod(shape) values in row-major order; for Layout::Upper that is complete
// symmetric matrices, of which only the upper triangles are written. Throws ProtocolError:
// NonFinite for NaN/Inf and for values that overflow the dtype; InvalidValue, when `nonzero`
// is set (variances), for a non-zero value that becomes 0 in float16.
// `out` is the string the packer appends to: the data is converted straight into it.
template <typename T>
void pack_tensor(Packer& pk, std::string& out, DType dtype, Layout layout,
                 const std::vector<uint64_t>& shape, const T* values, const std::string& path,
                 bool nonzero = false);

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
// including values that overflow T.
template <typename T>
void unpack_tensor(const TensorIn& t, T* out);

std::string shape_string(const std::vector<uint64_t>& shape);

}  // namespace fednode::wire
