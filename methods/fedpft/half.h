// FedPFT's 16-bit transfer: a mixture rounded to exactly what a receiver of float16 tensors sees.
#pragma once

#include "methods/knowledge.h"

#include <string>

namespace fednode {

// Rounds weights, means and covariances through float16 (a full covariance's upper triangle,
// mirrored, since one triangle travels). The result stays usable: variances are floored at
// `variance_floor` (itself rounded up to a positive float16) and a full covariance that lost
// positive definiteness in the rounding gets the smallest growing diagonal jitter that restores
// it (diagonal-only as the last resort), still in float16 values. Weights are kept as rounded
// (their sum may differ from 1 by float16 rounding; sampling normalises them).
// Throws InputError, naming `where`, if a value is beyond float16's range, or if the means or
// variances are so small that float16 keeps less than 99 % of them (relative to their norm).
//
// `probes`, for a one-component full mixture, are unit directions (rows) along which its
// covariance may have lost definiteness in the rounding (DP-FedPFT's eigenvectors at the floor,
// psd_projection): where the rounded covariance's quadratic form is clearly negative along one,
// it is not positive definite, and the factorisation that would say so is skipped. The result is
// the same with or without them.
GaussianMixture round_mixture_to_half(const GaussianMixture& g, double variance_floor,
                                      const std::string& where, const MatrixD* probes = nullptr);

// A covariance sketch rounded through float16, as a receiver of a 16-bit transfer sees it.
// Throws InputError, naming `where`, if a value is beyond float16's range.
CovarianceSketch round_sketch_to_half(const CovarianceSketch& s, const std::string& where);

// True if every parameter is a float16 value (what round_mixture_to_half produces).
bool is_half_exact(const GaussianMixture& g);

}  // namespace fednode
