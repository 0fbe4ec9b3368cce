#include "core/exact_sum.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace fednode {
namespace {

constexpr int kFractionBits = 320;
// 768 bits: 320 fractional, the rest integer and sign. The window's top limb is kept pure sign
// (keep_headroom), so sums stay below 2^(703 - 320) = 2^383.
constexpr int kLimbs = 12;
constexpr uint64_t kOnes = ~uint64_t{0};

// A term as mantissa * 2^(pos - kFractionBits), pos >= 0, or refused.
struct Term {
  bool refused = false;
  bool negative = false;
  uint64_t mantissa = 0;  // at most 2^53
  int pos = 0;
};

Term decompose(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  Term t;
  t.negative = (bits >> 63) != 0;
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  t.mantissa = bits & ((uint64_t{1} << 52) - 1);
  if (biased == 0x7ff) {  // Inf or NaN
    t.refused = true;
    return t;
  }
  int exponent = -1074;  // subnormals have no hidden bit
  if (biased != 0) {
    t.mantissa |= uint64_t{1} << 52;
    exponent = biased - 1075;
  }
  if (t.mantissa == 0) return t;
  if (exponent + 52 >= kFractionBits) {  // |v| >= 2^320
    t.refused = true;
    return t;
  }
  t.pos = exponent + kFractionBits;
  if (t.pos < 0) {
    // Below the grid: this term alone is rounded to it, to nearest, ties to even.
    const int s = -t.pos;
    t.pos = 0;
    if (s >= 64) {  // the mantissa, below 2^53, is less than half a unit
      t.mantissa = 0;
      return t;
    }
    const uint64_t kept = t.mantissa >> s, rest = t.mantissa & ((uint64_t{1} << s) - 1),
                   half = uint64_t{1} << (s - 1);
    t.mantissa = kept + ((rest > half || (rest == half && (kept & 1) != 0)) ? 1 : 0);
  }
  return t;
}

int top_bit(uint64_t x) { return 63 - __builtin_clzll(x); }

uint64_t sign_fill(uint64_t top_limb) { return (top_limb >> 63) != 0 ? kOnes : 0; }

// x[0..w) += (or -=) the two limbs lo, hi at x[j], x[j + 1], carrying to the top.
void add_at(uint64_t* x, int w, int j, uint64_t lo, uint64_t hi, bool subtract) {
  const uint64_t term[2] = {lo, hi};
  uint64_t carry = 0;
  for (int k = j; k < w; ++k) {
    const uint64_t t = k - j < 2 ? term[k - j] : 0;
    if (k - j >= 2 && carry == 0) break;
    const uint64_t xk = x[k];
    if (!subtract) {
      const uint64_t s = xk + t;
      const uint64_t s2 = s + carry;
      carry = (s < xk || s2 < s) ? 1 : 0;
      x[k] = s2;
    } else {
      const uint64_t d = xk - t;
      const uint64_t next = (xk < t || d < carry) ? 1 : 0;
      x[k] = d - carry;
      carry = next;
    }
  }
}

// The 64 bits of x[0..w) from bit `pos` up (bits beyond the top read as 0).
uint64_t bits_from(const uint64_t* x, int w, int pos) {
  const int limb = pos / 64, bit = pos % 64;
  uint64_t out = x[limb] >> bit;
  if (bit != 0 && limb + 1 < w) out |= x[limb + 1] << (64 - bit);
  return out;
}

bool any_below(const uint64_t* x, int pos) {
  const int limb = pos / 64, bit = pos % 64;
  for (int k = 0; k < limb; ++k)
    if (x[k] != 0) return true;
  return bit != 0 && (x[limb] & ((uint64_t{1} << bit) - 1)) != 0;
}

}  // namespace

bool ExactSums::add(size_t i, double v) {
  const Term t = decompose(v);
  if (t.refused) return false;
  if (t.mantissa == 0) return true;
  const int low = t.pos / 64;
  // One limb above the term's top, so that the sum cannot reach the window's sign limb.
  const int high = (t.pos + top_bit(t.mantissa)) / 64 + 2;
  if (hi_ == lo_) widen(low, high);
  else if (low < lo_ || high > hi_) widen(std::min(low, lo_), std::max(high, hi_));
  const int bit = t.pos % 64;
  add_at(entry(i), hi_ - lo_, low - lo_, t.mantissa << bit, bit != 0 ? t.mantissa >> (64 - bit) : 0, t.negative);
  keep_headroom(i);
  return true;
}

bool ExactSums::add(size_t first, const double* v, size_t n) {
  for (size_t j = 0; j < n; ++j)
    if (!add(first + j, v[j])) return false;
  return true;
}

void ExactSums::add(const ExactSums& other) {
  if (other.size_ != size_) throw std::logic_error("ExactSums::add: sums of different sizes");
  if (other.hi_ == other.lo_) return;
  // Both values are below 2^(64 (hi - 1) - 1): one more limb holds their sum with room to spare.
  const int high = std::max(hi_, other.hi_) + 1;
  widen(hi_ == lo_ ? other.lo_ : std::min(lo_, other.lo_), std::min(high, kLimbs));
  const int w = hi_ - lo_, ow = other.hi_ - other.lo_;
  for (size_t i = 0; i < size_; ++i) {
    uint64_t* x = entry(i);
    const uint64_t* y = other.entry(i);
    const uint64_t fill = sign_fill(y[ow - 1]);
    uint64_t carry = 0;
    for (int k = 0; k < w; ++k) {
      const int at = lo_ + k;
      const uint64_t t = at < other.lo_ ? 0 : at < other.hi_ ? y[at - other.lo_] : fill;
      const uint64_t s = x[k] + t;
      const uint64_t s2 = s + carry;
      carry = (s < x[k] || s2 < s) ? 1 : 0;
      x[k] = s2;
    }
  }
  // Only when both windows reached the last limb was there no spare one.
  for (size_t i = 0; i < size_; ++i) keep_headroom(i);
}

void ExactSums::keep_headroom(size_t i) {
  const uint64_t* x = entry(i);
  const int w = hi_ - lo_;
  if (x[w - 1] == sign_fill(x[w - 2])) return;
  if (hi_ == kLimbs) throw std::overflow_error("ExactSums: a sum reached 2^383");
  widen(lo_, hi_ + 1);
}

void ExactSums::widen(int lo, int hi) {
  const int old_w = hi_ - lo_, w = hi - lo;
  std::vector<uint64_t> next(size_ * static_cast<size_t>(w));
  for (size_t i = 0; i < size_; ++i) {
    uint64_t* dst = next.data() + i * static_cast<size_t>(w);
    const uint64_t* src = old_w > 0 ? entry(i) : nullptr;
    const uint64_t fill = old_w > 0 ? sign_fill(src[old_w - 1]) : 0;
    for (int k = lo; k < hi; ++k)
      dst[k - lo] = (old_w == 0 || k < lo_) ? 0 : k < hi_ ? src[k - lo_] : fill;
  }
  limbs_.swap(next);
  lo_ = lo;
  hi_ = hi;
}

double ExactSums::value(size_t i) const {
  const int w = hi_ - lo_;
  if (w == 0) return 0.0;
  std::array<uint64_t, kLimbs> m{};
  std::copy(entry(i), entry(i) + w, m.begin());
  const bool negative = (m[static_cast<size_t>(w) - 1] >> 63) != 0;
  if (negative) {  // two's complement: invert and add one
    for (int k = 0; k < w; ++k) m[static_cast<size_t>(k)] = ~m[static_cast<size_t>(k)];
    add_at(m.data(), w, 0, 1, 0, false);
  }
  int top = -1;
  for (int k = w - 1; k >= 0 && top < 0; --k)
    if (m[static_cast<size_t>(k)] != 0) top = 64 * k + top_bit(m[static_cast<size_t>(k)]);
  if (top < 0) return 0.0;
  const int scale = 64 * lo_ - kFractionBits;  // the window's bit 0 is worth 2^scale
  double magnitude;
  if (top < 53) {
    magnitude = std::ldexp(static_cast<double>(m[0]), scale);  // exact
  } else {
    const int low = top - 52;  // bits [low, top] are the mantissa
    uint64_t mantissa = bits_from(m.data(), w, low) & ((uint64_t{1} << 53) - 1);
    const bool round_bit = (bits_from(m.data(), w, low - 1) & 1) != 0;
    if (round_bit && ((mantissa & 1) != 0 || any_below(m.data(), low - 1))) ++mantissa;  // 2^53 is exact too
    magnitude = std::ldexp(static_cast<double>(mantissa), low + scale);
  }
  return negative ? -magnitude : magnitude;
}

}  // namespace fednode
