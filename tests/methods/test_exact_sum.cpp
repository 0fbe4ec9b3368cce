// ExactSums: order-independent, exactly rounded sums of doubles (core/exact_sum.h), which FedCGS
// relies on to fold pieces in any order and fit the same head.
#include "core/exact_sum.h"
#include "core/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace fednode {
namespace {

// Terms spread over 2^-20 .. 2^20 with both signs: adding them in double loses bits at every
// step, in an order-dependent way.
std::vector<double> wide_terms(size_t n, uint64_t seed) {
  Rng rng = Rng::stream(seed, Purpose::Generic, 0, 0);
  std::vector<double> v(n);
  for (auto& x : v) x = std::ldexp(rng.uniform() - 0.5, static_cast<int>(rng.below(41)) - 20);
  return v;
}

TEST(ExactSums, TheOrderOfTheTermsNeverChangesTheSum) {
  const std::vector<double> terms = wide_terms(5000, 1);
  ExactSums forwards(1), backwards(1), shuffled(1);
  for (double x : terms) forwards.add(0, x);
  for (auto it = terms.rbegin(); it != terms.rend(); ++it) backwards.add(0, *it);
  std::vector<double> mixed = terms;
  Rng rng = Rng::stream(2, Purpose::Generic, 0, 0);
  for (size_t i = mixed.size() - 1; i > 0; --i) std::swap(mixed[i], mixed[rng.below(i + 1)]);
  for (double x : mixed) shuffled.add(0, x);
  EXPECT_EQ(forwards.value(0), backwards.value(0));
  EXPECT_EQ(forwards.value(0), shuffled.value(0));
  // Double addition in the two orders does differ here, which is why the sums exist.
  double f = 0, b = 0;
  for (double x : terms) f += x;
  for (auto it = terms.rbegin(); it != terms.rend(); ++it) b += *it;
  EXPECT_NE(f, b);
}

TEST(ExactSums, TheSumIsTheExactSumRoundedOnce) {
  // __float128 holds these sums exactly (113 bits: the terms' bits span 2^-73 .. 2^20, and 5000
  // of them add 13 more),
  // and its conversion to double rounds to nearest, ties to even.
  const std::vector<double> terms = wide_terms(5000, 3);
  ExactSums sum(1);
  __float128 exact = 0;
  for (double x : terms) {
    ASSERT_TRUE(sum.add(0, x));
    exact += x;
  }
  EXPECT_EQ(sum.value(0), static_cast<double>(exact));

  ExactSums cancel(1);
  cancel.add(0, 1e16);
  cancel.add(0, 1.0);
  cancel.add(0, -1e16);
  EXPECT_EQ(cancel.value(0), 1.0);  // double addition gives 0
  // A tie between two doubles goes to the even one: 2^53 + 1 lies halfway between 2^53 and 2^53 + 2.
  ExactSums tie(2);
  tie.add(0, 0x1p53);
  tie.add(0, 1.0);
  EXPECT_EQ(tie.value(0), 0x1p53);
  tie.add(1, 0x1p53 + 2);
  tie.add(1, 1.0);
  EXPECT_EQ(tie.value(1), 0x1p53 + 4);
  // Just above the tie rounds up.
  tie.add(0, 0x1p-60);
  EXPECT_EQ(tie.value(0), 0x1p53 + 2);
}

TEST(ExactSums, NegativeTotalsAndFullCancellation) {
  const std::vector<double> terms = wide_terms(1000, 4);
  ExactSums sum(2);
  __float128 exact = 0;
  for (double x : terms) {
    sum.add(0, -std::abs(x));
    exact -= std::abs(x);
    sum.add(1, x);
  }
  for (double x : terms) sum.add(1, -x);
  EXPECT_LT(sum.value(0), 0);
  EXPECT_EQ(sum.value(0), static_cast<double>(exact));
  EXPECT_EQ(sum.value(1), 0.0);
  EXPECT_FALSE(std::signbit(sum.value(1)));
}

TEST(ExactSums, TermsOutsideTheRangeAreRefusedAndTinyOnesRounded) {
  ExactSums sum(1);
  EXPECT_FALSE(sum.add(0, std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(sum.add(0, std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(sum.add(0, ExactSums::kTermLimit));
  EXPECT_FALSE(sum.add(0, -ExactSums::kTermLimit));
  EXPECT_EQ(sum.value(0), 0.0);  // refusals add nothing
  const double largest = std::nextafter(ExactSums::kTermLimit, 0.0);
  ASSERT_TRUE(sum.add(0, largest));
  EXPECT_EQ(sum.value(0), largest);

  // Exact from 2^-268 up; below the grid of 2^-320 each term is rounded on its own.
  ExactSums tiny(3);
  tiny.add(0, 0x1.fffffffffffffp-268);
  EXPECT_EQ(tiny.value(0), 0x1.fffffffffffffp-268);
  tiny.add(1, 0x1p-322);  // a quarter of the grid: nothing
  tiny.add(1, 0x1p-322);
  EXPECT_EQ(tiny.value(1), 0.0);
  tiny.add(2, 0x1.8p-320);  // one and a half: two, ties to even
  EXPECT_EQ(tiny.value(2), 0x1p-319);
  EXPECT_TRUE(tiny.add(2, std::numeric_limits<double>::denorm_min()));
  EXPECT_EQ(tiny.value(2), 0x1p-319);
}

TEST(ExactSums, TheWindowFollowsTheTermsAndKeepsEveryValue) {
  // Features of size 1e30 and 1e-30 give statistics near 2^200 and 2^-200: the widest window
  // a float32 federation needs, and every value still exact.
  ExactSums sum(3);
  sum.add(0, 1.5);
  EXPECT_EQ(sum.limbs_per_entry(), 3);  // its two limbs, and one above for sums
  sum.add(1, 0x1.8p200);
  sum.add(2, -0x1.8p-200);
  EXPECT_EQ(sum.value(0), 1.5);
  EXPECT_EQ(sum.value(1), 0x1.8p200);
  EXPECT_EQ(sum.value(2), -0x1.8p-200);
  sum.add(1, 0x1p-200);  // both ends in one entry: 400 bits apart, held exactly
  sum.add(1, -0x1.8p200);
  EXPECT_EQ(sum.value(1), 0x1p-200);
  // Many terms near the limit: the window grows a limb rather than overflow.
  ExactSums big(1);
  const double near_limit = std::nextafter(ExactSums::kTermLimit, 0.0);
  __float128 exact = 0;
  for (int k = 0; k < 1000; ++k) {
    ASSERT_TRUE(big.add(0, near_limit));
    exact += near_limit;
  }
  EXPECT_EQ(big.value(0), static_cast<double>(exact));
}

TEST(ExactSums, AddingSumsEqualsAddingTheirTerms) {
  const std::vector<double> terms = wide_terms(3000, 5);
  ExactSums all(3), left(3), right(3);
  for (size_t i = 0; i < terms.size(); ++i) {
    all.add(i % 3, terms[i]);
    (i < 1700 ? left : right).add(i % 3, terms[i]);
  }
  left.add(right);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(left.value(k), all.value(k));
  ExactSums block(4);
  const double v[4] = {1.5, -2.25, std::numeric_limits<double>::infinity(), 7.0};
  EXPECT_FALSE(block.add(0, v, 4));
  EXPECT_EQ(block.value(0), 1.5);
  EXPECT_EQ(block.value(1), -2.25);
  EXPECT_EQ(block.value(3), 0.0);  // after the refused term, nothing was added
}

}  // namespace
}  // namespace fednode
