#include "methods/fedtc/prototypes.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

namespace fednode {

int64_t kept_count(int64_t n, double keep_ratio) {
  if (!(keep_ratio > 0.0 && keep_ratio <= 1.0))
    throw InputError("fedtc: keep ratio (alpha) must be in (0, 1], got " + std::to_string(keep_ratio));
  if (n <= 0) return 0;
  // The small slack keeps e.g. 0.99 * 100 at 99 despite 0.99 not being exact in binary.
  const auto k = static_cast<int64_t>(std::floor(keep_ratio * static_cast<double>(n) + 1e-9));
  return std::clamp<int64_t>(k, 1, n);
}

std::vector<int64_t> filter_outliers(const MatrixF& Z, double keep_ratio) {
  const int64_t n = Z.rows();
  const int64_t keep = kept_count(n, keep_ratio);
  if (keep == n) {
    std::vector<int64_t> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), int64_t{0});
    return all;
  }
  const MatrixD Zd = Z.cast<double>();
  const VectorD center = Zd.colwise().mean().transpose();
  const double center_norm = center.norm();
  std::vector<std::pair<double, int64_t>> scored(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double row_norm = Zd.row(i).norm();
    const double sim = (row_norm > 0.0 && center_norm > 0.0)
                           ? Zd.row(i).dot(center) / (row_norm * center_norm)
                           : 0.0;
    scored[static_cast<size_t>(i)] = {sim, i};
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int64_t> kept(static_cast<size_t>(keep));
  for (int64_t i = 0; i < keep; ++i) kept[static_cast<size_t>(i)] = scored[static_cast<size_t>(i)].second;
  std::sort(kept.begin(), kept.end());
  return kept;
}

MatrixF batch_prototypes(const MatrixF& Z, int batch_size, Rng& rng) {
  if (batch_size < 1)
    throw InputError("fedtc: prototype batch size (B) must be at least 1, got " + std::to_string(batch_size));
  const int64_t n = Z.rows();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)],
              order[static_cast<size_t>(rng.below(static_cast<uint64_t>(i + 1)))]);
  const int64_t count = (n + batch_size - 1) / batch_size;
  MatrixF out(count, Z.cols());
  for (int64_t p = 0; p < count; ++p) {
    const int64_t begin = p * batch_size, end = std::min(n, begin + batch_size);
    VectorD sum = VectorD::Zero(Z.cols());
    for (int64_t r = begin; r < end; ++r) sum += Z.row(order[static_cast<size_t>(r)]).cast<double>().transpose();
    out.row(p) = (sum / static_cast<double>(end - begin)).cast<float>().transpose();
  }
  return out;
}

}  // namespace fednode
