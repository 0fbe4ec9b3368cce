// What a diagonal (or spherical) mixture cannot carry: how the feature dimensions vary together
// within a class. A receiver estimates it from its own real features and draws its synthetic
// features with it (FedPftOptions::sample_correlation, docs/methods/fedpft.md): each mixture
// component keeps exactly the means and variances that were sent, and gains the receiver's
// within-class correlation. Nothing more is sent and nothing of the receiver's data leaves it.
#pragma once

#include "methods/types.h"

namespace fednode {

struct WithinClassCorrelation {
  // Lower Cholesky factor L of the correlation matrix R = L L^T (d x d, unit diagonal); empty
  // when no class held two rows, in which case there is nothing to estimate from.
  MatrixD factor;
  // Ledoit-Wolf weight of the identity in R, in [0, 1]: near 0 when the residuals pin the
  // correlation down, near 1 when they are few against d (R then falls back towards no correlation).
  double shrinkage = 1;
  int64_t residuals = 0;  // rows of classes with at least two rows
};

// The pooled within-class correlation of `local`: every row minus its class mean (classes with
// one row carry no within-class information and are left out), each dimension scaled to unit
// variance (dimensions that never vary within a class stay uncorrelated), then Ledoit-Wolf
// shrinkage towards the identity, with the optimal weight estimated from the residuals as
// scikit-learn's ledoit_wolf_shrinkage (assume_centered) does. Deterministic; the features are read
// in chunks, never copied whole.
WithinClassCorrelation within_class_correlation(const Features& local);

}  // namespace fednode
