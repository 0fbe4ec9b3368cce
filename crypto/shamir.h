// Shamir's secret sharing of 32-byte secrets over GF(2^8), byte by byte (the field of AES,
// x^8 + x^4 + x^3 + x + 1): what secure aggregation's dropout recovery shares among a star's
// leaves (docs/privacy.md, "Secure aggregation"). Any `threshold` shares give the secret back;
// fewer say nothing about it (each byte of a share is then uniform). x-coordinates are 1..255,
// so at most 255 parties share one secret.
#pragma once

#include "core/secret_rng.h"

#include <array>
#include <cstdint>
#include <vector>

namespace fednode {

struct SecretShare {
  uint8_t x = 0;                 // the party's coordinate, 1..255
  std::array<uint8_t, 32> y{};   // the polynomials' values at x, one per byte of the secret
};

// One share per coordinate in `xs` (distinct, non-zero), from polynomials of degree threshold - 1
// whose coefficients are drawn from `coefficients`. Throws std::invalid_argument for a threshold
// outside [1, xs.size()] or a bad coordinate.
std::vector<SecretShare> shamir_split(const SecretKey32& secret, int threshold, const std::vector<uint8_t>& xs,
                                      SecretRng& coefficients);

// Lagrange interpolation at 0 of the given shares (distinct coordinates; at least the threshold
// the secret was split with, or the result is unrelated to it). Throws std::invalid_argument for
// no share, a zero or a repeated coordinate.
SecretKey32 shamir_combine(const std::vector<SecretShare>& shares);

}  // namespace fednode
