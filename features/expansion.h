// FedCGS's feature expansion (paper 001, "Feature expansion", Fig. 3): every node maps its
// backbone features through the same random projection followed by a ReLU,
//   f -> max(0, W f),  W in R^{D x d},  W_ij ~ N(0, 1/d) drawn from a seed all nodes share,
// and the federation works on the D-dimensional result. A linear head (FedCGS's closed form among
// them) separates classes in that space that the backbone's d dimensions leave entangled; the price
// is FedCGS's D x D Gram matrix on the wire instead of d x d. docs/methods/fedcgs.md has the numbers.
//
// Nodes with different projections would add statistics of different spaces, so the expansion is
// folded into the backbone fingerprint (expanded_fingerprint): the handshake and every piece of
// knowledge already carry that, and a node refuses a fingerprint that is not its own.
#pragma once

#include "core/types.h"

#include <cstdint>
#include <string>

namespace fednode {

struct FeatureExpansion {
  int dim = 0;        // D; 0 leaves the features as they are
  uint64_t seed = 1;  // the same at every node of a federation

  bool enabled() const { return dim > 0; }
};

// The wire's default max_dim: nodes refuse knowledge of a larger dimension. (FedCGS's D x D Gram
// matrix, sent as its upper triangle, outgrows the default 256 MiB message above D of about 8 180;
// its sender says so.)
constexpr int kMaxExpansionDim = 16384;

// Throws InputError naming the bad value: D outside [0, kMaxExpansionDim].
void validate(const FeatureExpansion& e);

// W (D x d), the same matrix for the same (d, seed) on every machine.
MatrixF expansion_projection(int in_dim, const FeatureExpansion& e);

// max(0, X W^T) with the labels unchanged; `f` itself when the expansion is off.
Features expand_features(Features f, const FeatureExpansion& e);
// The same from rows read in place (a copy of them when the expansion is off).
Features expand_rows(const FeatureRows& rows, const FeatureExpansion& e);

// "<fingerprint>+relu-projection-<D>-seed-<seed>"; `fingerprint` itself when the expansion is off.
std::string expanded_fingerprint(const std::string& fingerprint, const FeatureExpansion& e);

}  // namespace fednode
