// What a diagonal (or spherical) mixture cannot carry: how the feature dimensions vary together
// within a class. A receiver draws its synthetic features with a within-class correlation
// (FedPftOptions::sample_correlation, docs/methods/fedpft.md): each mixture component keeps exactly
// the means and variances that were sent, and gains the correlation. The correlation is either the
// receiver's own estimate (Local: nothing more is sent) or the one the contributors' covariance
// sketches add up to (Shared: each node sends a low-rank sketch beside its mixtures).
#pragma once

#include "methods/knowledge.h"
#include "core/types.h"

#include <vector>

namespace fednode {

struct WithinClassCorrelation {
  // Lower Cholesky factor L of the correlation matrix R = L L^T (d x d, unit diagonal); empty
  // when there was nothing to estimate from.
  MatrixD factor;
  // Ledoit-Wolf weight of the identity in R, in [0, 1]: near 0 when the residuals pin the
  // correlation down, near 1 when they are few against d (R then falls back towards no correlation).
  // 0 for a correlation built from sketches, whose diagonal part already keeps R well conditioned.
  double shrinkage = 1;
  int64_t residuals = 0;  // rows behind the estimate, of classes with at least two rows
};

// The pooled within-class correlation of `local`: every row minus its class mean (classes with
// one row carry no within-class information and are left out), each dimension scaled to unit
// variance (dimensions that never vary within a class stay uncorrelated), then Ledoit-Wolf
// shrinkage towards the identity, with the optimal weight estimated from the residuals as
// scikit-learn's ledoit_wolf_shrinkage (assume_centered) does. Deterministic; the features are read
// in chunks, never copied whole.
WithinClassCorrelation within_class_correlation(const Features& local);

// The same residuals' covariance as a sketch of at most `rank` directions: the exact variances,
// and the `rank` leading eigenvectors of the correlation (found by subspace iteration from a fixed
// start, so deterministic) scaled back to the features' units. A node with no class of two rows
// gives a sketch of 0 residuals.
CovarianceSketch sketch_within_class(const Features& local, int rank);

// Sketches of disjoint contributor sets, each weighted by its residuals: the variances average, the
// low-rank parts stack. rank > 0 truncates the stack to its `rank` leading directions of correlation
// (what a node forwards); rank 0 keeps every direction (what a head is drawn with).
CovarianceSketch combine_sketches(const std::vector<const CovarianceSketch*>& sketches, int rank);

// The correlation a sketch stands for, factored for drawing; empty when it summarises no residuals.
WithinClassCorrelation correlation_of(const CovarianceSketch& sketch);

// Shapes, finiteness, non-negative variances, and at most `samples` residuals (the count of the
// mixtures it travels with); names `where` in the InputError.
void validate_sketch(const CovarianceSketch& sketch, int dim, int64_t samples, const std::string& where);

}  // namespace fednode
