#include "core/fixed_ring.h"

#include <cmath>

namespace fednode {

bool to_fixed_ring(double v, Ring128& out) {
  if (!std::isfinite(v) || !(std::abs(v) < kFixedRingRange)) return false;
  // Scaling by a power of two is exact; nearbyint rounds half to even in the default mode; the
  // result is an integer below 2^127 in magnitude, which converts to __int128 exactly.
  const double scaled = std::nearbyint(std::ldexp(v, kFixedRingFractionBits));
  out = static_cast<Ring128>(static_cast<__int128>(scaled));
  return true;
}

double from_fixed_ring(Ring128 r) {
  // __int128 to double rounds to nearest; the scaling back is exact (no result is subnormal:
  // the smallest non-zero magnitude is 2^-72).
  return std::ldexp(static_cast<double>(static_cast<__int128>(r)), -kFixedRingFractionBits);
}

}  // namespace fednode
