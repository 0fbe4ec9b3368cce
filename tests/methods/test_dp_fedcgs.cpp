// DP-FedCGS and the privacy accounting: the zCDP conversion is the one the docs derive, the noise
// has the scale its sensitivity calls for on every entry (absent classes too), it is secret and
// deterministic, clipping bounds what one sample can move, and the head on noisy statistics stays
// usable; the release policy withholds small classes.
#include "core/rng.h"
#include "methods/dp/accounting.h"
#include "methods/dp/min_count.h"
#include "methods/fedcgs/dp_stats.h"
#include "methods/fedcgs/fedcgs.h"

#include "../common/labelled_blobs.h"
#include "../common/node_context.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace fednode {
namespace {

Features blobs(int n, int d, int classes, uint64_t seed, double scale = 1.0, int skip_class = -1) {
  return test::labelled_blobs(n, d, classes, seed, scale, skip_class);
}

FedCgsOptions dp_options(double epsilon, double clip = 1.0) {
  FedCgsOptions o;
  o.dp = true;
  o.dp_epsilon = epsilon;
  o.dp_delta = 1e-5;
  o.clip_norm = clip;
  return o;
}

TEST(DpAccounting, ZcdpConversionRoundTripsAndGaussianRhoIsTheTextbooks) {
  for (double eps : {0.1, 0.5, 1.0, 8.0})
    for (double delta : {1e-5, 1e-9}) {
      const double rho = zcdp_rho_for(eps, delta);
      EXPECT_NEAR(zcdp_epsilon(rho, delta), eps, 1e-12 * eps);
    }
  EXPECT_DOUBLE_EQ(gaussian_rho(2.0, 4.0), 4.0 / 32.0);
  // Bun & Steinke's Proposition 1.3 at rho = 0.5, delta = e^-2: 0.5 + 2 sqrt(0.5 * 2) = 2.5.
  EXPECT_NEAR(zcdp_epsilon(0.5, std::exp(-2.0)), 2.5, 1e-12);
}

TEST(DpAccounting, DisjointClassesComposeInParallelAndAnExactReleaseIsNotPrivate) {
  PrivacyRelease a, b;
  a.mechanism = b.mechanism = "gaussian (FedPFT Theorem 4.1)";
  a.classes = {0};
  b.classes = {1};
  a.epsilon = 1.0;
  b.epsilon = 2.0;
  a.delta = b.delta = 1e-5;
  PrivacyTotal t = compose({a, b}, 2);
  EXPECT_DOUBLE_EQ(t.epsilon, 2.0) << "one sample is in one class";
  EXPECT_DOUBLE_EQ(t.delta, 1e-5);
  b.classes = {0};
  EXPECT_DOUBLE_EQ(compose({a, b}, 2).epsilon, 3.0) << "the same class twice adds up";
  // Two zCDP releases over all classes add their rho before converting.
  const PrivacyRelease z = zcdp_release("statistics", zcdp_rho_for(1.0, 1e-5), 1e-5);
  EXPECT_NEAR(compose({z}, 3).epsilon, 1.0, 1e-12);
  EXPECT_NEAR(compose({z, z}, 3).rho, 2 * z.rho, 1e-15);
  EXPECT_LT(compose({z, z}, 3).epsilon, 2.0) << "zCDP composes better than adding epsilons";
  PrivacyRelease exact;
  exact.mechanism = "none";
  exact.epsilon = kNotPrivate;
  EXPECT_TRUE(std::isinf(compose({z, exact}, 3).epsilon));
  PrivacyRelease withheld;
  withheld.mechanism = "withheld";
  withheld.epsilon = kNotPrivate;  // ignored: nothing left the node
  EXPECT_EQ(compose({withheld}, 3).epsilon, 0.0);
}

TEST(DpFedCgs, NoiseHasTheScaleItsSensitivityCallsForOnEveryEntry) {
  const Features f = blobs(2000, 12, 4, 1, 1.0, /*skip_class=*/3);
  const FedCgsOptions o = dp_options(1.0, 2.0);
  const StatsNoiseScale scale = stats_noise_scale(o);
  EXPECT_NEAR(scale.rho, zcdp_rho_for(1.0, 1e-5), 1e-15);
  // Equal shares: rho/3 each, so sigma = sensitivity / sqrt(2 rho / 3).
  EXPECT_NEAR(scale.sigma_a, 2.0 / std::sqrt(2 * scale.rho / 3), 1e-12);
  EXPECT_NEAR(scale.sigma_n, 1.0 / std::sqrt(2 * scale.rho / 3), 1e-12);
  EXPECT_NEAR(scale.sigma_b, 4.0 / std::sqrt(2 * scale.rho / 3), 1e-12);
  EXPECT_NEAR(gaussian_rho(2.0, scale.sigma_a) + gaussian_rho(1.0, scale.sigma_n) + gaussian_rho(4.0, scale.sigma_b),
              scale.rho, 1e-12);

  const SecretKey32 key = simulation_noise_key(5);
  const StatsKnowledge noisy = release_private_stats(f, o, key, 2);
  // Every row is below the clipping norm here, so the exact part is compute_stats itself.
  const StatsKnowledge exact = compute_stats(f);
  const MatrixD dA = noisy.A - exact.A;
  const double sd_a = std::sqrt(dA.squaredNorm() / static_cast<double>(dA.size()));
  EXPECT_NEAR(sd_a, scale.sigma_a, 0.25 * scale.sigma_a);
  EXPECT_NE(noisy.A.row(3).norm(), 0.0) << "a class the node does not hold is released as noise too";
  double sum_sq = 0;
  int64_t entries = 0;
  for (Eigen::Index i = 0; i < exact.B.rows(); ++i)
    for (Eigen::Index j = i; j < exact.B.cols(); ++j, ++entries)
      sum_sq += std::pow(noisy.B(i, j) - exact.B(i, j), 2);
  EXPECT_NEAR(std::sqrt(sum_sq / static_cast<double>(entries)), scale.sigma_b, 0.2 * scale.sigma_b);
  EXPECT_EQ(noisy.B, noisy.B.transpose());
  EXPECT_DOUBLE_EQ(noisy.noise.a, scale.sigma_a * scale.sigma_a);
  EXPECT_DOUBLE_EQ(noisy.noise.b, scale.sigma_b * scale.sigma_b);
  EXPECT_DOUBLE_EQ(noisy.noise.n, scale.sigma_n * scale.sigma_n + 1.0 / 12.0);
  EXPECT_NO_THROW(validate_stats(noisy, 4, 12, "noisy statistics"));

  // Deterministic under one key (a restarted node sends the same release), other under another.
  const StatsKnowledge again = release_private_stats(f, o, key, 2);
  EXPECT_EQ(again.A, noisy.A);
  EXPECT_EQ(again.B, noisy.B);
  EXPECT_EQ(again.N, noisy.N);
  EXPECT_NE(release_private_stats(f, o, simulation_noise_key(6), 2).A, noisy.A);
  EXPECT_NE(release_private_stats(f, o, key, 3).A, noisy.A) << "each node its own stream";
}

TEST(DpFedCgs, ClippingBoundsWhatOneSampleMoves) {
  // With almost no noise the release is the statistics of the clipped rows.
  Features f = blobs(50, 6, 3, 2, 10.0);  // norms near 10
  const FedCgsOptions o = dp_options(1e12, 1.5);
  const StatsKnowledge s = release_private_stats(f, o, simulation_noise_key(1), 0);
  int64_t n = 0;
  for (int64_t c : s.N) n += c;
  EXPECT_EQ(n, 50);
  EXPECT_LE(s.B.trace(), 50 * 1.5 * 1.5 * (1 + 1e-9)) << "sum of squared norms of rows clipped to 1.5";
  EXPECT_GT(s.B.trace(), 50 * 1.5 * 1.5 * (1 - 1e-5));
}

TEST(DpFedCgs, RefusesBadSettingsAndRunsOnlyWithASecretKey) {
  FedCgsOptions o = dp_options(1.0);
  o.clip_norm = 0;
  EXPECT_THROW(make_fedcgs(o), InputError);
  o = dp_options(-1);
  EXPECT_THROW(make_fedcgs(o), InputError);
  o = dp_options(1.0);
  o.dp_split = {1, 0, 1};
  EXPECT_THROW(make_fedcgs(o), InputError);
  const Features f = blobs(100, 4, 2, 3);
  NodeContext ctx = test::node_context(0, 2, 4, 9);
  ctx.noise_key.reset();
  const auto method = make_fedcgs(dp_options(1.0));
  try {
    method->summarize(f, ctx);
    FAIL() << "a DP release without a secret key";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no secret key"), std::string::npos) << e.what();
  }
}

// Distributed DP: each of m members of a mask group adds 1/(m - 1 - T) of the variance, so that
// the sum of the other members' noise, seen by any member with T colluders, is the full noise.
// The ledger says the node's share and the assumption; with `counts` only N is shared.
TEST(DpFedCgs, DistributedNoiseSharesTheVarianceAmongTheMembers) {
  FedCgsOptions o = dp_options(1.0, 2.0);
  o.dp_distributed = true;
  EXPECT_DOUBLE_EQ(distributed_noise_share(o, 9), 1.0 / 8);
  o.dp_colluders = 7;
  EXPECT_DOUBLE_EQ(distributed_noise_share(o, 9), 1.0);
  o.dp_colluders = 8;
  EXPECT_THROW(distributed_noise_share(o, 9), InputError);
  o.dp_colluders = 2;
  const StatsNoiseScale full = stats_noise_scale(o);
  const double share = distributed_noise_share(o, 9);  // 1/6
  const Features f = blobs(500, 6, 3, 4);
  const StatsKnowledge part = release_private_stats(f, o, simulation_noise_key(1), 3, nullptr, {share, share, share});
  EXPECT_DOUBLE_EQ(part.noise.a, full.sigma_a * full.sigma_a * share);
  EXPECT_DOUBLE_EQ(part.noise.b, full.sigma_b * full.sigma_b * share);
  // The members other than a reader and its two colluders carry at least the full variance.
  EXPECT_GE((9 - 1 - 2) * part.noise.a, full.sigma_a * full.sigma_a * (1 - 1e-12));

  // The method shares the noise only for what it masks, and says so in the ledger.
  const auto method = make_fedcgs(o);
  NodeContext ctx = test::node_context(3, 3, 6, 1);
  const StatsKnowledge alone = std::get<StatsKnowledge>(method->summarize(f, ctx).payload);
  EXPECT_DOUBLE_EQ(alone.noise.a, full.sigma_a * full.sigma_a) << "no mask group: the full noise";
  auto masking = std::make_shared<LocalMasking>();
  for (NodeId m = 1; m <= 9; ++m) masking->group.insert(m);
  masking->add_masks = [](uint64_t, Ring128*, size_t) {};  // masks do not matter to the noise
  ctx.masking = masking;
  const StatsKnowledge shared = std::get<StatsKnowledge>(method->summarize(f, ctx).payload);
  EXPECT_DOUBLE_EQ(shared.noise.a, full.sigma_a * full.sigma_a * share);
  const std::vector<PrivacyRelease> ledger = method->privacy(f, ctx);
  ASSERT_EQ(ledger.size(), 1u);
  EXPECT_DOUBLE_EQ(ledger[0].epsilon, 1.0) << "the bound holds for every sum that can be read";
  EXPECT_NEAR(ledger[0].sigma[0], full.sigma_a * std::sqrt(share), 1e-9);
  EXPECT_NE(ledger[0].note.find("up to 2 colluders"), std::string::npos) << ledger[0].note;
  masking->counts_only = true;
  const StatsKnowledge counts = std::get<StatsKnowledge>(method->summarize(f, ctx).payload);
  EXPECT_DOUBLE_EQ(counts.noise.a, full.sigma_a * full.sigma_a) << "A travels plain with counts_only: its full noise";
  EXPECT_DOUBLE_EQ(counts.noise.n, full.sigma_n * full.sigma_n * share + 1.0 / 12.0);
}

TEST(DpFedCgs, TheHeadOnNoisyStatisticsIsFiniteAndNearlyExactWhenTheNoiseIsSmall) {
  const Features train = blobs(4000, 16, 4, 4), test = blobs(1000, 16, 4, 5);
  const NodeContext ctx = test::node_context(0, 4, 16, 9);
  const auto exact_head = make_fedcgs(FedCgsOptions{})->fit_head({}, &train, ctx);
  // The node's own head uses its data exactly; a head on its released knowledge is what others get.
  for (double eps : {1e6, 1.0, 0.1}) {
    const auto method = make_fedcgs(dp_options(eps, 2.0));
    const Knowledge released = method->summarize(train, ctx);
    const auto head = method->fit_head({released}, nullptr, test::node_context(1, 4, 16, 9));
    const double acc = head->accuracy(test), exact = exact_head->accuracy(test);
    EXPECT_TRUE(std::isfinite(acc));
    if (eps >= 1e6) EXPECT_NEAR(acc, exact, 0.005) << "negligible noise";
    if (eps == 1.0) EXPECT_GT(acc, exact - 0.15) << "4000 samples at epsilon 1";
    EXPECT_GT(acc, 0.25) << "epsilon " << eps << ": better than chance";
  }
}

TEST(DpFedCgs, NoisyCountsBelowTheirNoiseCountAsAbsent) {
  StatsKnowledge s = zero_stats(3, 2);
  s.N = {500, -4, 9};
  s.A.row(0) << 500, 0;
  s.A.row(1) << 3, -2;
  s.A.row(2) << 1, 9;
  s.B << 600, 1, 1, 400;
  s.noise.n = 16;  // sd 4: counts below 12 are noise
  s.noise.a = 1;
  s.noise.b = 1;
  const StatsKnowledge u = usable_statistics(s);
  EXPECT_EQ(u.N, (std::vector<int64_t>{500, 0, 0}));
  EXPECT_EQ(u.A.row(2).norm(), 0.0);
  EXPECT_EQ(absent_classes(u), (std::vector<int>{1, 2}));
}

TEST(ReleasePolicy, WithholdsClassesBelowTheMinimumAndSaysSo) {
  Features f = blobs(100, 3, 3, 6);
  std::vector<int64_t> rows;
  int kept_of_2 = 0;
  for (int64_t i = 0; i < f.size(); ++i)
    if (f.y[static_cast<size_t>(i)] != 2 || kept_of_2++ < 4) rows.push_back(i);
  f = f.subset(rows);
  std::vector<int> withheld;
  const auto kept = withhold_small_classes(f, 5, &withheld);
  ASSERT_TRUE(kept);
  EXPECT_EQ(withheld, std::vector<int>{2});
  EXPECT_EQ(std::count(kept->y.begin(), kept->y.end(), 2), 0);
  EXPECT_EQ(kept->size(), f.size() - 4);
  EXPECT_FALSE(withhold_small_classes(f, 4)) << "4 samples meet a minimum of 4";
  const auto entries = withheld_releases(f, 5);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].mechanism, "withheld");
  EXPECT_EQ(entries[0].classes, std::vector<int>{2});
}

}  // namespace
}  // namespace fednode
