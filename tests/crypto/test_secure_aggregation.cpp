// Secure aggregation's building blocks: the fixed-point ring holds statistics within its bound and
// sums them exactly, pair seeds agree at both ends and nowhere else, and a group's masks cancel
// in the sum while one masked vector decodes to nothing like the values it hides.
#include "core/fixed_ring.h"
#include "crypto/noise_key.h"
#include "crypto/run_id.h"
#include "crypto/secure_aggregation.h"
#include "crypto/shamir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

namespace fednode {
namespace {

Identity identity(uint8_t n) {
  std::array<uint8_t, 32> seed{};
  seed[0] = n;
  seed[31] = 0x5a;
  return Identity::from_seed(seed);
}

TEST(FixedRing, RoundTripsWithinTheResolutionAndRefusesWhatIsOutOfRange) {
  for (double v : {0.0, 1.0, -1.0, 0.1, -123456.789, 1e13, -1e13, 3.0e16, 1e-20, -7.25e-22}) {
    Ring128 r;
    ASSERT_TRUE(to_fixed_ring(v, r)) << v;
    EXPECT_LE(std::abs(from_fixed_ring(r) - v), std::ldexp(1.0, -73) * (1 + 1e-12) + std::abs(v) * 0x1p-53) << v;
  }
  Ring128 r = 0;
  EXPECT_FALSE(to_fixed_ring(0x1p55, r));
  EXPECT_FALSE(to_fixed_ring(-0x1p55, r));
  EXPECT_FALSE(to_fixed_ring(std::numeric_limits<double>::quiet_NaN(), r));
  EXPECT_FALSE(to_fixed_ring(std::numeric_limits<double>::infinity(), r));
  // Sums of encodings are encodings of sums, negative values included (two's complement).
  Ring128 a, b;
  ASSERT_TRUE(to_fixed_ring(2.5, a));
  ASSERT_TRUE(to_fixed_ring(-4.0, b));
  EXPECT_EQ(from_fixed_ring(a + b), -1.5);
  // Ten Gram entries of 10^12 sum to 10^13 without wrapping (docs/privacy.md's bound).
  Ring128 sum = 0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(to_fixed_ring(1e12, r));
    sum += r;
  }
  EXPECT_EQ(from_fixed_ring(sum), 1e13);
}

TEST(SecureAggregation, BothEndsOfAPairDeriveOneSeedThatDependsOnRunGroupAndPair) {
  const Identity a = identity(1), b = identity(2), c = identity(3);
  const RunId run = derive_run_id("secagg-test"), other = derive_run_id("another run");
  const MaskSeed ab = pairwise_mask_seed(a, 1, b.public_key(), 2, run, 7);
  EXPECT_EQ(pairwise_mask_seed(b, 2, a.public_key(), 1, run, 7), ab);
  EXPECT_NE(pairwise_mask_seed(a, 1, c.public_key(), 3, run, 7), ab);
  EXPECT_NE(pairwise_mask_seed(a, 1, b.public_key(), 2, other, 7), ab);
  EXPECT_NE(pairwise_mask_seed(a, 1, b.public_key(), 2, run, 8), ab);
  EXPECT_NE(pairwise_mask_seed(a, 1, b.public_key(), 5, run, 7), ab) << "the ids are bound too";
}

// A leaf's self seed is its own (another key gives another), the same on a restart, another in
// another run, and not its DP noise key, which the same construction makes under another name.
// The unmasking round's consistency tags: only the two ends of a pair can make one, it binds the
// direction (a tag reflected back to its sender does not pass as the peer's) and the split, and
// its key is not the pair seed a dropout reveals.
TEST(SecureAggregation, AConsistencyTagBindsThePairTheDirectionAndTheSplit) {
  const Identity a = identity(1), b = identity(2), c = identity(3);
  const RunId run = derive_run_id("consistency");
  const MaskSeed ab = consistency_key(a, 1, b.public_key(), 2, run, 7);
  EXPECT_EQ(consistency_key(b, 2, a.public_key(), 1, run, 7), ab);
  EXPECT_NE(consistency_key(a, 1, c.public_key(), 3, run, 7), ab);
  EXPECT_NE(pairwise_mask_seed(a, 1, b.public_key(), 2, run, 7), ab);
  const Contributors s{1, 2, 3}, d{4};
  const ConsistencyTag tag = consistency_tag(ab, 1, 2, s, d);
  EXPECT_TRUE(tags_equal(tag, consistency_tag(consistency_key(b, 2, a.public_key(), 1, run, 7), 1, 2, s, d)));
  EXPECT_FALSE(tags_equal(tag, consistency_tag(ab, 2, 1, s, d))) << "the direction is bound";
  EXPECT_FALSE(tags_equal(tag, consistency_tag(ab, 1, 2, Contributors{1, 2}, Contributors{3, 4})));
  EXPECT_FALSE(tags_equal(tag, consistency_tag(ab, 1, 2, Contributors{1, 2, 3, 4}, Contributors{})));
}

TEST(SecureAggregation, ASelfSeedIsTheNodesOwnPerRunSecret) {
  const RunId run = derive_run_id("self-seed-test"), other = derive_run_id("self-seed-test-2");
  EXPECT_EQ(self_mask_seed(identity(1), run), self_mask_seed(identity(1), run));
  EXPECT_NE(self_mask_seed(identity(1), run), self_mask_seed(identity(2), run));
  EXPECT_NE(self_mask_seed(identity(1), run), self_mask_seed(identity(1), other));
  EXPECT_NE(self_mask_seed(identity(1), run), derive_noise_key(identity(1), run));
  // Masks of different streams under one seed differ: A, N and B are masked independently.
  std::vector<Ring128> a(8, 0), b(8, 0);
  apply_mask(self_mask_seed(identity(1), run), 0, a.data(), a.size(), false);
  apply_mask(self_mask_seed(identity(1), run), 1, b.data(), b.size(), false);
  EXPECT_NE(a, b);
}

TEST(SecureAggregation, AGroupsMasksCancelInTheSumAndHideEachMember) {
  const RunId run = derive_run_id("secagg-test");
  std::map<NodeId, PublicKey> group;
  std::vector<Identity> ids;
  for (uint8_t i = 0; i < 5; ++i) {
    ids.push_back(identity(static_cast<uint8_t>(10 + i)));
    group[i + 1u] = ids.back().public_key();  // ids 1..5
  }
  const size_t n = 10001;  // more than one ChaCha20 block of entries, not a multiple of 4
  std::vector<std::vector<double>> values(5, std::vector<double>(n));
  std::vector<double> total(n, 0.0);
  std::vector<Ring128> masked_sum(n, 0);
  std::vector<Ring128> first_masked;
  for (size_t m = 0; m < 5; ++m) {
    std::vector<Ring128> ring(n);
    for (size_t k = 0; k < n; ++k) {
      values[m][k] = std::sin(0.37 * static_cast<double>(k * (m + 1))) * 100.0;
      total[k] += values[m][k];
      ASSERT_TRUE(to_fixed_ring(values[m][k], ring[k]));
    }
    add_pairwise_masks(ring.data(), n, /*stream=*/0, ids[m], static_cast<NodeId>(m + 1), group, run, 1);
    if (m == 0) first_masked = ring;
    for (size_t k = 0; k < n; ++k) masked_sum[k] += ring[k];
  }
  for (size_t k = 0; k < n; ++k) EXPECT_NEAR(from_fixed_ring(masked_sum[k]), total[k], 1e-12) << k;
  // One member's masked values decode to ring-sized garbage, nowhere near its |values| <= 100.
  size_t near = 0;
  for (size_t k = 0; k < n; ++k) near += std::abs(from_fixed_ring(first_masked[k])) < 1e4;
  EXPECT_EQ(near, 0u) << "a uniform 128-bit mask leaves a value below 10^4 with probability 2^-40";
  // Leaving one member out, the masks do not cancel: that is what dropout recovery is for.
  std::vector<Ring128> partial(n, 0);
  for (size_t m = 0; m < 4; ++m) {
    std::vector<Ring128> ring(n);
    for (size_t k = 0; k < n; ++k) ASSERT_TRUE(to_fixed_ring(values[m][k], ring[k]));
    add_pairwise_masks(ring.data(), n, /*stream=*/0, ids[m], static_cast<NodeId>(m + 1), group, run, 1);
    for (size_t k = 0; k < n; ++k) partial[k] += ring[k];
  }
  // ... until the survivors' seeds with the missing member are removed (Bonawitz's recovery).
  for (size_t m = 0; m < 4; ++m) {
    const MaskSeed s = pairwise_mask_seed(ids[m], static_cast<NodeId>(m + 1), group.at(5), 5, run, 1);
    apply_mask(s, /*stream=*/0, partial.data(), n, /*subtract=*/true);  // each survivor m + 1 < 5 had added it
  }
  for (size_t k = 0; k < n; ++k)
    EXPECT_NEAR(from_fixed_ring(partial[k]), total[k] - values[4][k], 1e-12) << k;
}

}  // namespace
}  // namespace fednode

namespace fednode {
namespace {

TEST(Shamir, AnyThresholdOfSharesGivesTheSecretBackAndFewerDoNot) {
  SecretKey32 secret;
  for (size_t b = 0; b < secret.size(); ++b) secret[b] = static_cast<uint8_t>(b * 37 + 11);
  SecretRng rng(simulation_noise_key(1), Purpose::Generic);
  const std::vector<uint8_t> xs = {1, 2, 3, 4, 5, 6, 7};
  const auto shares = shamir_split(secret, 4, xs, rng);
  ASSERT_EQ(shares.size(), 7u);
  // Every 4-subset reconstructs, in any order.
  for (int mask = 0; mask < 128; ++mask) {
    std::vector<SecretShare> subset;
    for (int i = 6; i >= 0; --i)
      if (mask & (1 << i)) subset.push_back(shares[static_cast<size_t>(i)]);
    if (subset.size() >= 4) EXPECT_EQ(shamir_combine(subset), secret) << mask;
    if (subset.size() == 3) EXPECT_NE(shamir_combine(subset), secret) << mask;
  }
  // A share on its own is not the secret, and threshold 1 is a copy.
  EXPECT_NE(shares[0].y, secret);
  EXPECT_EQ(shamir_split(secret, 1, {9}, rng)[0].y, secret);
  EXPECT_THROW(shamir_split(secret, 8, xs, rng), std::invalid_argument);
  EXPECT_THROW(shamir_split(secret, 2, {1, 1}, rng), std::invalid_argument);
  EXPECT_THROW(shamir_split(secret, 1, {0}, rng), std::invalid_argument);
  EXPECT_THROW(shamir_combine({shares[0], shares[0]}), std::invalid_argument);
  EXPECT_THROW(shamir_combine({}), std::invalid_argument);
}

}  // namespace
}  // namespace fednode
