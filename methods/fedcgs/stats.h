// FedCGS's additive statistics (paper Eq. 3-5): per-class feature sums A, per-class counts N and
// the Gram matrix B = sum f f^T. Sums of these over any partition of the data equal the
// statistics of the whole, which is what makes FedCGS independent of topology and partition.
#pragma once

#include "methods/knowledge.h"

#include <string>

namespace fednode {

// Statistics of `features` in float64. B is accumulated with BLAS dsyrk over chunks of rows
// converted from float32 to double, and stored with both triangles filled. `chunk_rows` = 0 picks
// max(384, 2^18 / d) rows per chunk (kept in cache between conversion and dsyrk); the result
// does not depend on it beyond rounding.
// Throws InputError for inconsistent or non-finite features.
StatsKnowledge compute_stats(const Features& features, int64_t chunk_rows = 0);

// Zero statistics for `num_classes` classes of dimension `dim`.
StatsKnowledge zero_stats(int num_classes, int dim);

// into += other (A, N and B summed). Shapes must agree; counts must not overflow.
void accumulate_stats(StatsKnowledge& into, const StatsKnowledge& other, const std::string& where);
StatsKnowledge add_stats(const StatsKnowledge& a, const StatsKnowledge& b);

// Checks what a received payload must satisfy before it is summed: shapes C x d, C and d x d,
// finite values, non-negative counts, zero sums for empty classes, a symmetric B with a
// non-negative diagonal. Throws InputError naming `where` and the first violation.
void validate_stats(const StatsKnowledge& s, int num_classes, int dim, const std::string& where);

// Sum of the class counts; throws InputError beyond 2^53 (counts are used as exact doubles).
int64_t total_count(const StatsKnowledge& s);

}  // namespace fednode
