// FedCGS's additive statistics (paper Eq. 3-5): per-class feature sums A, per-class counts N and
// the Gram matrix B = sum f f^T. Sums of these over any partition of the data equal the
// statistics of the whole, which is what makes FedCGS independent of topology and partition.
#pragma once

#include "core/exact_sum.h"
#include "methods/knowledge.h"

#include <optional>
#include <string>
#include <vector>

namespace fednode {

// Statistics of `features` in float64. B is accumulated with BLAS dsyrk over chunks of rows
// converted from float32 to double, and stored with both triangles filled. `chunk_rows` = 0 picks
// max(384, 2^18 / d) rows per chunk (kept in cache between conversion and dsyrk); the result
// does not depend on it beyond rounding.
// Throws InputError for inconsistent or non-finite features.
StatsKnowledge compute_stats(const Features& features, int64_t chunk_rows = 0);

// Zero statistics for `num_classes` classes of dimension `dim`.
StatsKnowledge zero_stats(int num_classes, int dim);

// Statistics summed exactly (core/exact_sum.h): the total does not depend on the order in which
// pieces were added, so a node may fold pieces in as they arrive (a star's hub, in whatever order
// its leaves answer) and fit the same head as any other order, and holds C*d + d(d+1)/2 sums
// rather than a C x d and a d x d matrix per piece. The total is rounded to double once.
class StatsSum {
 public:
  StatsSum(int num_classes, int dim);
  // Throws InputError naming `where`, the sum unchanged, for a shape other than this sum's,
  // counts that overflow, or an entry at or beyond ExactSums::kTermLimit (2^320).
  void add(const StatsKnowledge& s, const std::string& where);
  void add(const StatsSum& other);  // same shape
  StatsKnowledge total() const;     // both triangles of B filled
  bool masked() const { return masked_.has_value(); }

 private:
  int num_classes_, dim_;
  std::vector<int64_t> counts_;
  StatsNoise noise_;
  std::optional<MaskedStats> masked_;  // the masked parts' ring sum (secure aggregation)
  ExactSums class_sums_;  // A, row-major
  ExactSums gram_;        // B's upper triangle, row by row from the diagonal
};

// Checks what a received payload must satisfy before it is summed: shapes C x d, C and d x d,
// finite values below ExactSums::kTermLimit, non-negative counts, zero sums for empty classes, a symmetric B with a
// non-negative diagonal. Noisy statistics (noise.any()) are held only to the shapes, finiteness,
// magnitude and symmetry, and counts within +-2^53. Throws InputError naming `where` and the first violation.
void validate_stats(const StatsKnowledge& s, int num_classes, int dim, const std::string& where);

// Throws InputError naming `where` and the first pair (i, j) where B(i, j) and B(j, i) differ
// beyond rounding.
void check_symmetric(const MatrixD& B, const std::string& where);

// Sum of the class counts; throws InputError beyond 2^53 (counts are used as exact doubles).
int64_t total_count(const StatsKnowledge& s);

}  // namespace fednode
