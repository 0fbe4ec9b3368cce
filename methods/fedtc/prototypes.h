// FedTC's client side (Section 3.3.1 of the paper): cosine-similarity outlier filtering and
// batch-level prototypes, for the features of one class.
#pragma once

#include "core/rng.h"
#include "core/types.h"

#include <cstdint>
#include <vector>

namespace fednode {

// How many of n samples the filter keeps: the paper's top(phi, alpha), i.e. floor(alpha * n)
// as `int(alpha * n)` computes it, but never fewer than one so that a small class is not
// dropped. alpha must be in (0, 1].
int64_t kept_count(int64_t n, double keep_ratio);

// Eq. (1)-(3): rows of Z ranked by cosine similarity to the class mean (the dataset-level
// prototype); returns the indices of the kept_count most similar rows in ascending order.
// Ties are broken by the lower index. A zero row (or a zero mean) has similarity 0, as
// torch.nn.functional.cosine_similarity's epsilon gives.
std::vector<int64_t> filter_outliers(const MatrixF& Z, double keep_ratio);

// Eq. (4): shuffles the rows with `rng` and averages consecutive groups of batch_size rows,
// one prototype per group: ceil(n / batch_size) prototypes. The last group may be smaller and is
// averaged over its own size (what a DataLoader without drop_last yields), so that no kept sample
// is wasted and a class with fewer than batch_size samples still yields one prototype.
MatrixF batch_prototypes(const MatrixF& Z, int batch_size, Rng& rng);

}  // namespace fednode
