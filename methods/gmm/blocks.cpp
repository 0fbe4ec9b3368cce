#include "methods/gmm/blocks.h"

#include "core/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace fednode::gmm_detail {

std::vector<RowRange> partition_rows(Index n, Index max_chunks) {
  std::vector<RowRange> out;
  if (n <= 0) return out;
  const Index chunks = std::max<Index>(1, std::min(max_chunks, n));
  const Index base = n / chunks, extra = n % chunks;
  Index begin = 0;
  for (Index c = 0; c < chunks; ++c) {
    const Index size = base + (c < extra ? 1 : 0);
    out.push_back({begin, begin + size});
    begin += size;
  }
  return out;
}

Index block_rows(Index width) {
  const Index target = (512 * 1024 / 8) / std::max<Index>(width, 1);
  return std::clamp<Index>(target, 16, 1024);
}

void load_block(const MatrixF& X, Index begin, Index rows, const VectorD& offset, bool squares,
                double* out) {
  const Index d = X.cols();
  const double* __restrict o = offset.data();
  for (Index i = 0; i < rows; ++i) {
    const float* __restrict x = X.data() + (begin + i) * d;
    if (squares) {
      double* __restrict z = out + i * 2 * d;
      double* __restrict z2 = z + d;
      for (Index j = 0; j < d; ++j) {
        const double v = static_cast<double>(x[j]) - o[j];
        z[j] = v;
        z2[j] = v * v;
      }
    } else {
      double* __restrict z = out + i * d;
      for (Index j = 0; j < d; ++j) z[j] = static_cast<double>(x[j]) - o[j];
    }
  }
}

VectorD finite_column_means(const MatrixF& X, const std::string& where) {
  const Index n = X.rows(), d = X.cols();
  // Fixed row ranges, added in order: the same means whatever the number of threads.
  const auto ranges = partition_rows(n, 8);
  std::vector<VectorD> sums(ranges.size());
  for_each_chunk(ranges.size(), static_cast<double>(n) * static_cast<double>(d) > kParallelFlops, [&](size_t c) {
    VectorD s = VectorD::Zero(d);
    for (Index i = ranges[c].begin; i < ranges[c].end; ++i) s += X.row(i).transpose().cast<double>();
    sums[c] = std::move(s);
  });
  VectorD mean = VectorD::Zero(d);
  for (const VectorD& s : sums) mean += s;
  // Sums of finite floats cannot overflow a double (n < 2^63 terms of at most 3.4e38), and a
  // NaN or infinity makes every sum it enters non-finite: only then is there something to name.
  if (!mean.allFinite()) require_finite(X, where);
  if (n > 0) mean /= static_cast<double>(n);
  return mean;
}

void require_finite(const MatrixF& X, const std::string& where) {
  // A float is NaN or infinite iff its exponent bits are all ones; an integer max over the
  // masked bits vectorises, unlike a floating-point test with early exit.
  const size_t count = static_cast<size_t>(X.size());
  uint32_t worst = 0;
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, X.data() + i, sizeof bits);
    worst = std::max(worst, bits & 0x7F800000u);
  }
  if (worst != 0x7F800000u) return;
  for (Index i = 0; i < X.rows(); ++i)
    for (Index j = 0; j < X.cols(); ++j)
      if (!std::isfinite(X(i, j)))
        throw InputError(where + ": non-finite value at row " + std::to_string(i) + ", column " +
                         std::to_string(j));
}

}  // namespace fednode::gmm_detail
