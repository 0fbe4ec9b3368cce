// Real numbers as elements of the ring Z / 2^128, in fixed point with 72 fraction bits: what
// secure aggregation (crypto/secure_aggregation.h) masks and sums. Masks are uniform ring
// elements that cancel in the sum, so a masked value on its own says nothing; the sum of the
// encodings of x_1..x_n is the encoding of their sum as long as that stays in range.
//
// The bound (docs/privacy.md, "Fixed point"): values and every partial sum must lie within
// +-2^55 (kFixedRingRange, 3.6e16); FedCGS's Gram matrix of 10^7 samples of features of norm
// 10^3 has entries up to 10^13, 3 600 times below it. The resolution is 2^-72 (2.1e-22): each
// value is rounded once, to the nearest multiple, so a sum of n encodings is within n 2^-73 of
// the exact sum, far below a double's rounding of any statistic of ordinary size.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fednode {

using Ring128 = unsigned __int128;

constexpr int kFixedRingFractionBits = 72;
constexpr double kFixedRingRange = 0x1p55;

// Nearest multiple of 2^-72, two's complement. False (nothing written) for NaN, Inf, or
// |v| >= kFixedRingRange.
bool to_fixed_ring(double v, Ring128& out);
// The ring element read as a signed fixed-point number, rounded to the nearest double.
double from_fixed_ring(Ring128 r);

// out[i] = lo[i] | hi[i] << 64: how a ring element travels (two little-endian uint64 words).
inline Ring128 ring_from_words(uint64_t lo, uint64_t hi) { return (static_cast<Ring128>(hi) << 64) | lo; }
inline uint64_t ring_low(Ring128 r) { return static_cast<uint64_t>(r); }
inline uint64_t ring_high(Ring128 r) { return static_cast<uint64_t>(r >> 64); }

}  // namespace fednode
