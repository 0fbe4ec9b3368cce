// Sums of doubles that do not depend on the order of their terms: each entry is a fixed-point
// integer multiple of 2^-320, so adding a term is integer addition, exact and associative, and a
// sum is rounded to double once, when it is read.
//
// Why: a FedCGS hub folds each leaf's statistics into its running sum as they arrive, in an order
// that differs from run to run; with floating-point addition the last bits of the head would
// differ with it. Integer sums also give secure aggregation (masks that cancel modulo a power of
// two) the ring it needs.
//
// Range: terms below 2^320 in magnitude (kTermLimit; larger ones are refused), sums below 2^383.
// Terms from 2^-268 up are exact; smaller ones are rounded to the grid of 2^-320, each on its own,
// so the order of the terms never matters. Statistics of float32 features lose nothing: every
// product of two float32 numbers is a multiple of 2^-298, and no float32 square exceeds 2^256.
//
// Storage follows the terms: every entry keeps the same window of 64-bit limbs, from the lowest
// limb any term has touched to one limb above the highest sum: a few limbs for statistics of
// one scale, at most 12 (96 bytes) for terms from 2^-320 to 2^320 in one sum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fednode {

class ExactSums {
 public:
  static constexpr double kTermLimit = 0x1p320;

  ExactSums() = default;
  explicit ExactSums(size_t size) : size_(size) {}

  size_t size() const { return size_; }

  // entry i += v. False (and nothing added) for a non-finite v or |v| >= kTermLimit.
  bool add(size_t i, double v);
  // entry (first + j) += v[j] for every j < n: false if any v[j] is refused, in which case the
  // entries before it hold their terms and the rest are unchanged.
  bool add(size_t first, const double* v, size_t n);
  // Entry by entry; `other` must have the same size.
  void add(const ExactSums& other);
  // The sum of entry i's terms, rounded to the nearest double (ties to even).
  double value(size_t i) const;
  // 64-bit limbs each entry holds now (its memory is 8 * size() * limbs_per_entry() bytes).
  int limbs_per_entry() const { return hi_ - lo_; }

 private:
  // Keeps every entry's value and holds limbs [lo, hi) of the number (lo <= lo_, hi >= hi_).
  void widen(int lo, int hi);
  // After a sum into entry i: its top limb must stay pure sign, so that the next term cannot
  // overflow the window.
  void keep_headroom(size_t i);
  uint64_t* entry(size_t i) { return limbs_.data() + i * static_cast<size_t>(hi_ - lo_); }
  const uint64_t* entry(size_t i) const { return limbs_.data() + i * static_cast<size_t>(hi_ - lo_); }

  size_t size_ = 0;
  // The number is 768 bits, limbs 0..11, value = int768 * 2^-320 in two's complement; every
  // entry stores limbs [lo_, hi_): those below are zero, those above repeat the sign.
  int lo_ = 0, hi_ = 0;
  std::vector<uint64_t> limbs_;
};

}  // namespace fednode
