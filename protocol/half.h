// Internal to protocol/: branch-free binary16 conversions for bulk tensor encoding, bit-identical
// to core/float16.h (tests/protocol/test_half.cpp checks that) but several times faster,
// which matters for FedPFT's multi-megabyte 16-bit transfers. The technique is the one of
// Maratyszcza's FP16 library: let the FPU do the rounding by scaling into the right exponent
// range. It needs IEEE float semantics (no -ffast-math), which the project does not enable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fednode::wire {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; overflow gives +-inf, NaN gives a quiet NaN (0x7E00 with sign).
inline uint16_t fast_float_to_half(float f) {
  const float scale_to_inf = bits_float(0x77800000u);   // 2^112
  const float scale_to_zero = bits_float(0x08800000u);  // 2^-110
  float base = (f < 0 ? -f : f) * scale_to_inf * scale_to_zero;
  const uint32_t w = float_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = bits_float((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = float_bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// Exact, including subnormals, infinities and NaN.
inline float fast_half_to_float(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float exp_scale = bits_float(0x07800000u);  // 2^-112
  const float normalized = bits_float((two_w >> 4) + (0xE0u << 23)) * exp_scale;
  const float denormalized = bits_float((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t result = sign | (two_w < (1u << 27) ? float_bits(denormalized) : float_bits(normalized));
  return bits_float(result);
}

// Bulk conversions for tensors, little-endian binary16 on the wire side. They use the CPU's F16C
// instructions where it has them (same IEEE rounding, several times faster) and the functions
// above otherwise; `portable` forces the latter, for tests that compare the two.
// Each returns true when some binary16 value is Inf or NaN (an encoder's input was non-finite or
// beyond 65504) or, with `flag_nonpositive` (variances), +-0 or negative: the caller then finds
// the offending element with the scalar functions. The check rides along the conversion, so a
// receiver needs no second pass over megabytes of variances.
bool doubles_to_halves(const double* src, char* dst, size_t n, bool flag_nonpositive, bool portable = false);
bool floats_to_halves(const float* src, char* dst, size_t n, bool flag_nonpositive, bool portable = false);
bool halves_to_doubles(const char* src, double* dst, size_t n, bool flag_nonpositive, bool portable = false);
bool halves_to_floats(const char* src, float* dst, size_t n, bool flag_nonpositive, bool portable = false);

}  // namespace fednode::wire
