#include "methods/fedcgs/stats.h"

#include "methods/fedcgs/masked_stats.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fednode {
namespace {

// Rows converted to double per dsyrk call. The converted chunk should still be in cache when
// dsyrk reads it: measured on Skylake-X with OpenBLAS (bench_gram, and a sweep of chunk sizes), 256-768
// rows run within noise of one dsyrk on the whole pre-converted matrix at d = 512 and 1280, while
// 4096+ rows (tens of MB) cost 10-30% more. At least 384 rows keep each call's work large
// (k = 384 rank update); about 2 MB per chunk beyond that for small d. A node thus never holds
// a second, double-precision copy of its feature matrix.
constexpr Eigen::Index kChunkScalars = Eigen::Index{1} << 18;
constexpr Eigen::Index kMinChunkRows = 384;
// Counts are used as doubles in the head; beyond 2^53 they would no longer be exact.
constexpr int64_t kMaxCount = int64_t{1} << 53;

// Features::validate, minus the element-by-element finiteness scan: that is done per chunk on
// the converted doubles (vectorised), so the features are read once instead of twice.
void check_features(const Features& f) {
  const std::string what = "FedCGS features";
  if (static_cast<size_t>(f.X.rows()) != f.y.size())
    throw InputError(what + ": " + std::to_string(f.X.rows()) + " feature rows but " +
                     std::to_string(f.y.size()) + " labels");
  if (f.num_classes <= 0) throw InputError(what + ": number of classes must be positive");
  if (f.X.cols() <= 0) throw InputError(what + ": the feature matrix has no columns");
  if (f.X.cols() > INT_MAX / 2)
    throw InputError(what + ": dimension " + std::to_string(f.X.cols()) + " is too large");
  for (size_t i = 0; i < f.y.size(); ++i)
    if (f.y[i] < 0 || f.y[i] >= f.num_classes)
      throw InputError(what + ": label " + std::to_string(f.y[i]) + " at row " + std::to_string(i) +
                       " is outside [0, " + std::to_string(f.num_classes) + ")");
}

[[noreturn]] void report_non_finite(const MatrixD& buf, Eigen::Index rows, Eigen::Index first_row) {
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < buf.cols(); ++j)
      if (!std::isfinite(buf(i, j)))
        throw InputError("FedCGS features: non-finite value at row " + std::to_string(first_row + i) +
                         ", column " + std::to_string(j));
  throw InputError("FedCGS features: non-finite value");
}

// Finite and below ExactSums::kTermLimit, every entry: what StatsSum adds exactly.
bool summable(const MatrixD& m) {
  const Eigen::Map<const Eigen::VectorXd> v(m.data(), m.size());
  return v.size() == 0 || (all_finite(v) && v.cwiseAbs().maxCoeff() < ExactSums::kTermLimit);
}

void check_masked_shape(const MaskedStats& m, int num_classes, int dim, const std::string& where) {
  const size_t C = static_cast<size_t>(num_classes), d = static_cast<size_t>(dim);
  if (m.group.empty()) throw InputError(where + ": masked statistics name no mask group");
  if (m.N.size() != C || m.A.size() != (m.counts_only ? 0 : C * d) || m.B.size() != (m.counts_only ? 0 : d * (d + 1) / 2))
    throw InputError(where + ": masked parts have " + std::to_string(m.A.size()) + ", " + std::to_string(m.N.size()) +
                     " and " + std::to_string(m.B.size()) + " entries, which is not the shape of " + std::to_string(C) +
                     " classes of dimension " + std::to_string(d));
}

// A variance sum stays far from overflow: 2^320 is the largest term the sums take at all.
bool noise_summable(const StatsNoise& n) {
  const auto ok = [](double v) { return v >= 0 && v < ExactSums::kTermLimit; };
  return ok(n.a) && ok(n.n) && ok(n.b);
}

void mirror_upper(MatrixD& B) {
  for (Eigen::Index i = 1; i < B.rows(); ++i)
    for (Eigen::Index j = 0; j < i; ++j) B(i, j) = B(j, i);
}

}  // namespace

StatsKnowledge zero_stats(int num_classes, int dim) {
  if (num_classes <= 0) throw InputError("FedCGS statistics need at least one class");
  if (dim <= 0) throw InputError("FedCGS statistics need a positive feature dimension");
  StatsKnowledge s;
  s.A = MatrixD::Zero(num_classes, dim);
  s.N.assign(static_cast<size_t>(num_classes), 0);
  s.B = MatrixD::Zero(dim, dim);
  return s;
}

StatsKnowledge compute_stats(const Features& features, int64_t chunk_rows) {
  check_features(features);
  const Eigen::Index n = features.X.rows(), d = features.X.cols();
  StatsKnowledge s = zero_stats(features.num_classes, static_cast<int>(d));
  if (n == 0) return s;

  if (chunk_rows < 0) throw InputError("FedCGS: chunk_rows must not be negative");
  const Eigen::Index wanted =
      chunk_rows > 0 ? static_cast<Eigen::Index>(chunk_rows) : std::max(kMinChunkRows, kChunkScalars / d);
  const Eigen::Index chunk = std::min({n, wanted, Eigen::Index{INT_MAX}});  // dsyrk takes int
  MatrixD buf(chunk, d);
  for (Eigen::Index start = 0; start < n; start += chunk) {
    const Eigen::Index rows = std::min(chunk, n - start);
    buf.topRows(rows) = features.X.middleRows(start, rows).cast<double>();
    // As one flat vector: Eigen's allFinite on a row-major block walks it column by column.
    if (!Eigen::Map<const Eigen::VectorXd>(buf.data(), rows * d).allFinite()) report_non_finite(buf, rows, start);
    for (Eigen::Index r = 0; r < rows; ++r) {
      const auto label = static_cast<size_t>(features.y[static_cast<size_t>(start + r)]);
      s.A.row(static_cast<Eigen::Index>(label)) += buf.row(r);
      ++s.N[label];
    }
    // Row-major buf is rows x d; Trans makes this B += buf^T buf on the upper triangle.
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(d), static_cast<int>(rows), 1.0,
                buf.data(), static_cast<int>(d), 1.0, s.B.data(), static_cast<int>(d));
  }
  mirror_upper(s.B);
  return s;
}

StatsSum::StatsSum(int num_classes, int dim)
    : num_classes_(num_classes),
      dim_(dim),
      counts_(static_cast<size_t>(std::max(num_classes, 0)), 0),
      class_sums_(static_cast<size_t>(std::max(num_classes, 0)) * static_cast<size_t>(std::max(dim, 0))),
      gram_(static_cast<size_t>(std::max(dim, 0)) * (static_cast<size_t>(std::max(dim, 0)) + 1) / 2) {
  if (num_classes <= 0) throw InputError("FedCGS statistics need at least one class");
  if (dim <= 0) throw InputError("FedCGS statistics need a positive feature dimension");
}

void StatsSum::add(const StatsKnowledge& s, const std::string& where) {
  if (s.A.rows() != num_classes_ || s.A.cols() != dim_ || s.N.size() != counts_.size() || s.B.rows() != dim_ ||
      s.B.cols() != dim_)
    throw InputError(where + ": statistics of shape " + std::to_string(s.A.rows()) + "x" +
                     std::to_string(s.A.cols()) + " cannot be added to " + std::to_string(num_classes_) + "x" +
                     std::to_string(dim_));
  // Noisy counts may be negative (docs/privacy.md); exact ones never are (validate_stats).
  for (size_t j = 0; j < counts_.size(); ++j)
    if ((s.N[j] < 0 && !s.noise.any()) || s.N[j] > kMaxCount - counts_[j] || s.N[j] < -kMaxCount - counts_[j])
      throw InputError(where + ": count of class " + std::to_string(j) + " is negative or overflows");
  if (!noise_summable(s.noise)) throw InputError(where + ": noise variances are negative, NaN or too large");
  // Checked before anything is added, so that a refused piece leaves the sum as it was.
  if (!summable(s.A) || !summable(s.B))
    throw InputError(where + ": a statistic is NaN, Inf or of magnitude 2^320 or more, beyond what FedCGS sums exactly");
  if (s.masked && masked_) {
    MaskedStats sum = *masked_;  // add_masked refuses another group or shape before anything is added
    add_masked(sum, *s.masked, where);
    masked_ = std::move(sum);
  } else if (s.masked) {
    masked_ = *s.masked;
  }
  for (size_t j = 0; j < counts_.size(); ++j) counts_[j] += s.N[j];
  noise_.a += s.noise.a;
  noise_.n += s.noise.n;
  noise_.b += s.noise.b;
  bool added = class_sums_.add(0, s.A.data(), static_cast<size_t>(s.A.size()));
  size_t at = 0;
  for (Eigen::Index i = 0; i < dim_; ++i) {
    const auto n = static_cast<size_t>(dim_ - i);
    added = added && gram_.add(at, &s.B(i, i), n);  // row-major: row i from the diagonal on is contiguous
    at += n;
  }
  if (!added) throw std::logic_error("StatsSum::add: a term passed the check but was refused");
}

void StatsSum::add(const StatsSum& other) {
  if (other.num_classes_ != num_classes_ || other.dim_ != dim_)
    throw std::logic_error("StatsSum::add: sums of different shapes");
  for (size_t j = 0; j < counts_.size(); ++j) {
    if (other.counts_[j] > kMaxCount - counts_[j] || other.counts_[j] < -kMaxCount - counts_[j])
      throw InputError("FedCGS statistics: count of class " + std::to_string(j) + " overflows");
  }
  if (other.masked_ && masked_) add_masked(*masked_, *other.masked_, "FedCGS statistics");
  else if (other.masked_) masked_ = other.masked_;
  for (size_t j = 0; j < counts_.size(); ++j) counts_[j] += other.counts_[j];
  noise_.a += other.noise_.a;
  noise_.n += other.noise_.n;
  noise_.b += other.noise_.b;
  class_sums_.add(other.class_sums_);
  gram_.add(other.gram_);
}

StatsKnowledge StatsSum::total() const {
  StatsKnowledge s = zero_stats(num_classes_, dim_);
  s.N = counts_;
  s.noise = noise_;
  s.masked = masked_;
  for (Eigen::Index k = 0; k < s.A.size(); ++k) s.A.data()[k] = class_sums_.value(static_cast<size_t>(k));
  size_t at = 0;
  for (Eigen::Index i = 0; i < dim_; ++i)
    for (Eigen::Index j = i; j < dim_; ++j) s.B(i, j) = gram_.value(at++);
  mirror_upper(s.B);
  return s;
}

void validate_stats(const StatsKnowledge& s, int num_classes, int dim, const std::string& where) {
  const auto shape = [](const MatrixD& m) {
    return std::to_string(m.rows()) + "x" + std::to_string(m.cols());
  };
  if (s.A.rows() != num_classes || s.A.cols() != dim)
    throw InputError(where + ": class sums A are " + shape(s.A) + ", expected " +
                     std::to_string(num_classes) + "x" + std::to_string(dim));
  if (s.N.size() != static_cast<size_t>(num_classes))
    throw InputError(where + ": " + std::to_string(s.N.size()) + " class counts, expected " +
                     std::to_string(num_classes));
  if (s.B.rows() != dim || s.B.cols() != dim)
    throw InputError(where + ": Gram matrix B is " + shape(s.B) + ", expected " + std::to_string(dim) +
                     "x" + std::to_string(dim));
  if (!all_finite(s.A)) throw InputError(where + ": class sums A hold NaN or Inf");
  if (!all_finite(s.B)) throw InputError(where + ": Gram matrix B holds NaN or Inf");
  if (!noise_summable(s.noise)) throw InputError(where + ": noise variances are negative, NaN or too large");
  if (s.masked) check_masked_shape(*s.masked, num_classes, dim, where);
  if (s.noise.any() || s.masked) {
    // Noisy statistics (DP-FedCGS): a count may be negative, an empty class has a noisy sum and
    // B's diagonal may dip below zero, so only what keeps sums and the head finite is checked.
    // Masked ones (secure aggregation) hold part of themselves in the ring, where nothing can be
    // checked until the group's sum is unmasked (methods/fedcgs/masked_stats.h checks it then).
    for (size_t j = 0; j < s.N.size(); ++j)
      if (s.N[j] < -kMaxCount || s.N[j] > kMaxCount)
        throw InputError(where + ": noisy count " + std::to_string(s.N[j]) + " of class " + std::to_string(j) +
                         " is out of range");
    if (!summable(s.A) || !summable(s.B))
      throw InputError(where + ": a statistic has magnitude 2^320 or more, beyond what FedCGS sums exactly");
    check_symmetric(s.B, where);
    return;
  }
  for (size_t j = 0; j < s.N.size(); ++j) {
    if (s.N[j] < 0 || s.N[j] > kMaxCount)
      throw InputError(where + ": count " + std::to_string(s.N[j]) + " of class " + std::to_string(j) +
                       " is out of range");
    if (s.N[j] == 0 && !s.A.row(static_cast<Eigen::Index>(j)).isZero(0.0))
      throw InputError(where + ": class " + std::to_string(j) + " has no samples but a non-zero sum");
  }
  total_count(s);  // throws if the counts add up beyond what a double holds exactly
  const double max_diag = dim > 0 ? s.B.diagonal().maxCoeff() : 0.0;
  if (dim > 0 && s.B.diagonal().minCoeff() < 0)
    throw InputError(where + ": Gram matrix B has a negative diagonal entry");
  // Bounds every genuine statistic obeys, so that what passes here cannot overflow when pieces
  // are summed or the head is fitted: no float32 feature exceeds FLT_MAX, and by Cauchy-Schwarz
  // a class's sum satisfies (sum x_k)^2 <= N_j * sum x_k^2 <= N_j * B_kk.
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  if (max_diag > static_cast<double>(total_count(s)) * kFloatMax * kFloatMax)
    throw InputError(where + ": Gram matrix B has a diagonal entry larger than " +
                     std::to_string(total_count(s)) + " float32 features can produce");
  for (Eigen::Index j = 0; j < s.A.rows(); ++j)
    for (Eigen::Index k = 0; k < s.A.cols(); ++k) {
      const double a = s.A(j, k);
      if (a * a > static_cast<double>(s.N[static_cast<size_t>(j)]) * s.B(k, k) * (1 + 1e-9))
        throw InputError(where + ": class sum A(" + std::to_string(j) + ", " + std::to_string(k) +
                         ") is too large for the class's count and the Gram matrix's diagonal");
    }
  // What the bounds above leave open (B off its diagonal) must still be summable.
  if (!summable(s.A) || !summable(s.B))
    throw InputError(where + ": a statistic has magnitude 2^320 or more, beyond what FedCGS sums exactly");
  check_symmetric(s.B, where);
}

void check_symmetric(const MatrixD& B, const std::string& where) {
  // Decoded statistics are symmetric by construction (the wire carries one triangle); statistics
  // handed over in-process must be too, up to the rounding of whoever produced them.
  // Tile by tile: B(j, i) walks a column, and at d = 4096 a plain double loop missed the cache
  // on every read of it.
  const Eigen::Index dim = B.rows();
  const double tol = 1e-10 * (dim > 0 ? B.diagonal().cwiseAbs().maxCoeff() : 0.0);
  constexpr Eigen::Index kTile = 64;
  for (Eigen::Index ti = 0; ti < dim; ti += kTile)
    for (Eigen::Index tj = 0; tj <= ti; tj += kTile)
      for (Eigen::Index i = ti; i < std::min<Eigen::Index>(ti + kTile, dim); ++i)
        for (Eigen::Index j = tj; j < std::min<Eigen::Index>(tj + kTile, i); ++j)
          if (std::abs(B(i, j) - B(j, i)) > tol)
            throw InputError(where + ": Gram matrix B is not symmetric at (" + std::to_string(i) + ", " +
                             std::to_string(j) + ")");
}

int64_t total_count(const StatsKnowledge& s) {
  int64_t n = 0;
  for (int64_t c : s.N) {
    if (c < 0 || c > kMaxCount - n) throw InputError("FedCGS statistics: total count is out of range");
    n += c;
  }
  return n;
}

}  // namespace fednode
