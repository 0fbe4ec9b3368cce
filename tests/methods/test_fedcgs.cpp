// FedCGS: additive statistics are exact under any partition and topology, merging follows the
// contributor rules, and the closed-form LDA head is right, finite and never predicts absent classes.
#include "methods/fedcgs/fedcgs.h"
#include "core/rng.h"

#include "../common/node_context.h"

#include <Eigen/LU>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace fednode {
namespace {

// Gaussian blobs: class c has mean `separation` * (unit vector c mod d) plus a shared offset,
// and a shared, correlated covariance, so total and within-class covariances differ.
Features blobs(int n, int d, int classes, double separation, uint64_t seed,
               const std::vector<int>& only_classes = {}) {
  Rng rng = Rng::stream(seed, Purpose::Generic, 0, 0);
  Features f;
  f.num_classes = classes;
  f.X.resize(n, d);
  f.y.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int c = only_classes.empty() ? static_cast<int>(rng.below(static_cast<uint64_t>(classes)))
                                       : only_classes[rng.below(only_classes.size())];
    f.y[static_cast<size_t>(i)] = c;
    double prev = 0;
    for (int j = 0; j < d; ++j) {
      const double z = rng.normal();
      const double v = z + 0.5 * prev;  // correlated neighbouring features
      prev = z;
      f.X(i, j) = static_cast<float>(3.0 + v + (j == c % d ? separation : 0.0));
    }
  }
  return f;
}

// Straightforward float64 reference for small data.
StatsKnowledge naive_stats(const Features& f) {
  StatsKnowledge s = zero_stats(f.num_classes, f.dim());
  for (int64_t i = 0; i < f.size(); ++i) {
    const Eigen::RowVectorXd x = f.X.row(i).cast<double>();
    s.A.row(f.y[static_cast<size_t>(i)]) += x;
    ++s.N[static_cast<size_t>(f.y[static_cast<size_t>(i)])];
    s.B += x.transpose() * x;
  }
  return s;
}

double rel_diff(const MatrixD& a, const MatrixD& b) {
  return (a - b).cwiseAbs().maxCoeff() / std::max(1e-300, b.cwiseAbs().maxCoeff());
}

void expect_stats_equal(const StatsKnowledge& a, const StatsKnowledge& b, double tol = 1e-12) {
  EXPECT_EQ(a.N, b.N);
  EXPECT_LE(rel_diff(a.A, b.A), tol);
  EXPECT_LE(rel_diff(a.B, b.B), tol);
}

// Rows of `f` split among `parts` nodes by a seeded assignment; part p never holds class p % C,
// so every node misses a class (label skew) while the union still holds everything.
std::vector<Features> partition(const Features& f, int parts, uint64_t seed) {
  Rng rng = Rng::stream(seed, Purpose::Partition, 0, 0);
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(parts));
  for (int64_t i = 0; i < f.size(); ++i) {
    int p;
    do p = static_cast<int>(rng.below(static_cast<uint64_t>(parts)));
    while (f.y[static_cast<size_t>(i)] == p % f.num_classes);
    rows[static_cast<size_t>(p)].push_back(i);
  }
  std::vector<Features> out;
  for (const auto& r : rows) out.push_back(f.subset(r));
  return out;
}

NodeContext ctx_for(NodeId node, const Features& f) { return test::node_context(node, f.num_classes, f.dim(), 7); }

const StatsKnowledge& stats_of(const Knowledge& k) { return std::get<StatsKnowledge>(k.payload); }

TEST(FedCgsStats, MatchNaiveFloat64AndBIsSymmetric) {
  const Features f = blobs(300, 7, 3, 4.0, 1);
  const StatsKnowledge s = compute_stats(f);
  expect_stats_equal(s, naive_stats(f));
  EXPECT_TRUE(s.B.isApprox(s.B.transpose(), 0.0));
  EXPECT_EQ(s.B, s.B.transpose());
  EXPECT_EQ(total_count(s), 300);
}

TEST(FedCgsStats, ChunkSizeDoesNotMatter) {
  const Features f = blobs(250, 9, 4, 4.0, 2);
  const StatsKnowledge whole = compute_stats(f, 1000);
  for (int64_t chunk : {1, 7, 64, 249}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const StatsKnowledge s = compute_stats(f, chunk);
    expect_stats_equal(s, whole);
    EXPECT_EQ(s.B, s.B.transpose());
  }
}

TEST(FedCgsStats, RejectBadFeatures) {
  Features f = blobs(20, 3, 2, 4.0, 3);
  f.y[5] = 2;
  EXPECT_THROW(compute_stats(f), InputError);
  f = blobs(20, 3, 2, 4.0, 3);
  f.X(4, 1) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(compute_stats(f), InputError);
  f = blobs(20, 3, 2, 4.0, 3);
  f.y.pop_back();
  EXPECT_THROW(compute_stats(f), InputError);
}

TEST(FedCgsStats, ValidationAcceptsBoundaryCasesAndRefusesImpossibleOnes) {
  // One class and a constant feature: A(1, 0)^2 = N * B(0, 0) exactly, Cauchy-Schwarz's
  // equality, which genuine statistics reach (up to rounding).
  Features f;
  f.num_classes = 2;
  f.X.resize(5, 2);
  for (int i = 0; i < 5; ++i) {
    f.X.row(i) << 0.7f, static_cast<float>(i);
    f.y.push_back(1);
  }
  EXPECT_NO_THROW(validate_stats(compute_stats(f), 2, 2, "one class"));
  // No samples, so Cauchy-Schwarz holds trivially: only the sign check refuses this diagonal.
  StatsKnowledge negative = zero_stats(2, 2);
  negative.B(0, 0) = -1.0;
  EXPECT_THROW(validate_stats(negative, 2, 2, "negative"), InputError);
  // The symmetry check works tile by tile: an asymmetry off the first tile of 64 columns.
  StatsKnowledge wide = zero_stats(1, 128);
  wide.N[0] = 10;
  wide.B.diagonal().setOnes();
  EXPECT_NO_THROW(validate_stats(wide, 1, 128, "wide"));
  wide.B(100, 70) = 0.5;
  try {
    validate_stats(wide, 1, 128, "asymmetric");
    ADD_FAILURE() << "an asymmetric B was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not symmetric at (100, 70)"), std::string::npos) << e.what();
  }
}

TEST(FedCgsStats, SummingRefusesCountsBeyondWhatADoubleHolds) {
  StatsKnowledge big = zero_stats(1, 2), other = zero_stats(1, 2);
  big.N[0] = int64_t{1} << 52;
  other.N[0] = (int64_t{1} << 52) + 1;
  StatsSum sum(1, 2);
  sum.add(big, "first");
  EXPECT_THROW(sum.add(other, "second"), InputError);
  EXPECT_EQ(sum.total().N[0], int64_t{1} << 52);  // the refused piece left nothing behind
  other.N[0] = int64_t{1} << 52;  // exactly 2^53: still exact
  sum.add(other, "second");
  EXPECT_EQ(sum.total().N[0], int64_t{1} << 53);
}

TEST(FedCgsStats, SummingRefusesTermsBeyondTheExactRangeAndLeavesTheSumAlone) {
  StatsKnowledge s = zero_stats(1, 2);
  s.N[0] = 1;
  s.A(0, 0) = 1.0;
  s.B(0, 0) = s.B(1, 1) = 2.0;
  StatsSum sum(1, 2);
  sum.add(s, "first");
  StatsKnowledge huge = s;
  huge.B(0, 1) = huge.B(1, 0) = 0x1p320;  // off the diagonal, which nothing else bounds
  EXPECT_THROW(sum.add(huge, "second"), InputError);  // A, which comes first, was not added
  EXPECT_EQ(sum.total().B, s.B);
  EXPECT_EQ(sum.total().N, s.N);
  try {
    validate_stats(huge, 1, 2, "from node 3");
    ADD_FAILURE() << "a term of 2^320 passed validation";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("from node 3: a statistic has magnitude 2^320"), std::string::npos) << e.what();
  }
}

StatsKnowledge sum_in_order(const std::vector<StatsKnowledge>& parts, const std::vector<size_t>& order) {
  StatsSum sum(static_cast<int>(parts[0].N.size()), static_cast<int>(parts[0].B.rows()));
  for (size_t i : order) sum.add(parts[i], "part " + std::to_string(i));
  return sum.total();
}

TEST(FedCgsStats, AnyPartitionAndSummationOrderGivesTheSameStatistics) {
  const Features all = blobs(600, 6, 4, 4.0, 4);
  const StatsKnowledge whole = compute_stats(all);
  const auto parts = partition(all, 5, 11);
  std::vector<StatsKnowledge> s;
  for (const auto& p : parts) s.push_back(compute_stats(p));

  const StatsKnowledge forwards = sum_in_order(s, {0, 1, 2, 3, 4});
  const StatsKnowledge backwards = sum_in_order(s, {4, 3, 2, 1, 0});
  const StatsKnowledge shuffled = sum_in_order(s, {2, 0, 4, 1, 3});
  // Sums of sums, as a tree of nodes forms them, equal the flat sum too.
  StatsSum left(4, 6), right(4, 6);
  left.add(s[0], "0");
  left.add(s[1], "1");
  for (size_t i : {2, 3, 4}) right.add(s[i], std::to_string(i));
  left.add(right);
  const StatsKnowledge tree = left.total();

  const FedCgsOptions opt;
  const Features test = blobs(400, 6, 4, 4.0, 5);
  const Labels expected = fit_lda_head(whole, opt)->predict(test.X);
  for (const StatsKnowledge* sum : std::vector<const StatsKnowledge*>{&backwards, &shuffled, &tree}) {
    // Bit for bit, whatever the order: the sums are exact and rounded once.
    EXPECT_EQ(sum->N, forwards.N);
    EXPECT_EQ(sum->A, forwards.A);
    EXPECT_EQ(sum->B, forwards.B);
  }
  expect_stats_equal(forwards, whole);
  EXPECT_EQ(fit_lda_head(forwards, opt)->predict(test.X), expected);
}

TEST(FedCgsMethod, FoldingPiecesAsTheyArriveGivesWhatMergingThemAtOnceGives) {
  const Features all = blobs(500, 5, 3, 3.0, 8);
  const auto parts = partition(all, 4, 12);
  const auto method = make_fedcgs({});
  std::vector<Knowledge> leaves;
  for (NodeId i = 1; i < 4; ++i) leaves.push_back(method->summarize(parts[i], ctx_for(i, all)));
  const NodeContext hub = ctx_for(0, all);
  const Knowledge at_once = method->merge(leaves, &parts[0], hub);
  // Folded in another order, as a hub whose leaves answered 3, 1, 2.
  const std::unique_ptr<KnowledgeSum> folded = method->start_sum(hub);
  ASSERT_NE(folded, nullptr);
  for (size_t i : {2, 0, 1}) folded->add(leaves[i], "leaf");
  EXPECT_EQ(folded->contributors(), (Contributors{1, 2, 3}));
  const Knowledge by_folding = method->merge(KnowledgeList({}, folded.get()), &parts[0], hub);
  EXPECT_EQ(by_folding.contributors, at_once.contributors);
  EXPECT_EQ(stats_of(by_folding).N, stats_of(at_once).N);
  EXPECT_EQ(stats_of(by_folding).A, stats_of(at_once).A);
  EXPECT_EQ(stats_of(by_folding).B, stats_of(at_once).B);
  // A folded sum is one more piece to the contributor rules: a piece holding all of it and more
  // replaces it, and one within it adds nothing.
  const Knowledge everyone = method->merge(leaves, &parts[0], hub);  // {0, 1, 2, 3}
  const Knowledge replaced = method->merge(KnowledgeList({&everyone}, folded.get()), &parts[0], hub);
  EXPECT_EQ(replaced.contributors, everyone.contributors);
  EXPECT_EQ(stats_of(replaced).B, stats_of(everyone).B);
  const Knowledge within = method->merge({leaves[0]}, &parts[2], ctx_for(2, all));  // {1, 2}
  const Knowledge kept = method->merge(KnowledgeList({&within}, folded.get()), &parts[0], hub);
  EXPECT_EQ(kept.contributors, (Contributors{0, 1, 2, 3}));
  EXPECT_EQ(stats_of(kept).B, stats_of(at_once).B);
  EXPECT_THROW(folded->add(leaves[0], "leaf 1 again"), std::logic_error);
}

TEST(FedCgsMethod, ChainAndStarTopologiesEqualOneMachine) {
  const Features all = blobs(500, 5, 4, 4.0, 6);
  const auto parts = partition(all, 5, 12);
  const Features test = blobs(300, 5, 4, 4.0, 7);
  for (LdaCovariance cov : {LdaCovariance::Total, LdaCovariance::Within}) {
    FedCgsOptions opt;
    opt.covariance = cov;
    const auto method = make_fedcgs(opt);
    const auto central = fit_lda_head(compute_stats(all), opt);
    const Labels expected = central->predict(test.X);

    // Linear chain n0 -> n1 -> ... -> n4: each merges what it got with its own data.
    std::vector<Knowledge> received;
    Knowledge last;
    for (NodeId id = 0; id < parts.size(); ++id) {
      const NodeContext ctx = ctx_for(id, all);
      last = method->merge(received, &parts[id], ctx);
      received = {last};
    }
    EXPECT_EQ(last.contributors, (Contributors{0, 1, 2, 3, 4}));
    expect_stats_equal(stats_of(last), compute_stats(all));

    // Star: leaves summarise, the hub (node 4) merges everything with its own data.
    std::vector<Knowledge> leaves;
    for (NodeId id = 0; id < 4; ++id) leaves.push_back(method->summarize(parts[id], ctx_for(id, all)));
    std::reverse(leaves.begin(), leaves.end());
    const Knowledge hub = method->merge(leaves, &parts[4], ctx_for(4, all));
    expect_stats_equal(stats_of(hub), compute_stats(all));

    EXPECT_EQ(method->fit_head({last}, nullptr, ctx_for(4, all))->predict(test.X), expected);
    EXPECT_EQ(method->fit_head(leaves, &parts[4], ctx_for(4, all))->predict(test.X), expected);
  }
}

Features add_features(const Features& a, const Features& b) {
  Features out;
  out.num_classes = a.num_classes;
  out.X.resize(a.X.rows() + b.X.rows(), a.X.cols());
  out.X << a.X, b.X;
  out.y = a.y;
  out.y.insert(out.y.end(), b.y.begin(), b.y.end());
  return out;
}

Knowledge knowledge_of(const Features& f, Contributors who, const NodeContext& ctx) {
  Knowledge k;
  k.contributors = std::move(who);
  k.backbone_fingerprint = ctx.backbone_fingerprint;
  k.dim = ctx.dim;
  k.num_classes = ctx.num_classes;
  k.payload = compute_stats(f);
  return k;
}

class FedCgsMerge : public ::testing::Test {
 protected:
  void SetUp() override {
    all = blobs(200, 4, 3, 4.0, 21);
    parts = partition(all, 4, 22);
    method = make_fedcgs(FedCgsOptions{});
  }
  NodeContext ctx(NodeId id) const { return ctx_for(id, all); }
  Features all;
  std::vector<Features> parts;
  std::unique_ptr<Method> method;
};

TEST_F(FedCgsMerge, DuplicatesAndSubsetsAreIgnored) {
  const Knowledge k0 = method->summarize(parts[0], ctx(0));
  const Knowledge k01 = method->merge({k0}, &parts[1], ctx(1));
  const Knowledge once = method->merge({k01}, &parts[2], ctx(2));
  // The same piece twice, and a piece that is a subset of another, change nothing.
  const Knowledge again = method->merge({k01, k0, k01, k0}, &parts[2], ctx(2));
  EXPECT_EQ(again.contributors, (Contributors{0, 1, 2}));
  EXPECT_EQ(stats_of(again).N, stats_of(once).N);
  EXPECT_EQ(stats_of(again).A, stats_of(once).A);
  EXPECT_EQ(stats_of(again).B, stats_of(once).B);
  expect_stats_equal(stats_of(once),
                     sum_in_order({compute_stats(parts[0]), compute_stats(parts[1]), compute_stats(parts[2])}, {0, 1, 2}));
}

TEST_F(FedCgsMerge, PieceThatAlreadyHoldsThisNodeDoesNotReAddLocal) {
  const Knowledge k1 = method->summarize(parts[1], ctx(1));
  const Knowledge k12 = method->merge({k1}, &parts[2], ctx(2));
  // Ring's second pass: node 2 receives knowledge it already contributed to.
  const Knowledge back = method->merge({k12}, &parts[2], ctx(2));
  EXPECT_EQ(back.contributors, (Contributors{1, 2}));
  EXPECT_EQ(stats_of(back).N, stats_of(k12).N);
  EXPECT_EQ(stats_of(back).B, stats_of(k12).B);
}

TEST_F(FedCgsMerge, PartialOverlapIsNotSummed) {
  const Knowledge k01 = knowledge_of(add_features(parts[0], parts[1]), {0, 1}, ctx(0));
  const Knowledge k12 = knowledge_of(add_features(parts[1], parts[2]), {1, 2}, ctx(1));
  const Knowledge m = method->merge({k12, k01}, &parts[3], ctx(3));
  // {0,1} and {1,2} overlap in node 1: only one of them ({0,1}, the smaller ids) may be summed.
  EXPECT_EQ(m.contributors, (Contributors{0, 1, 3}));
  expect_stats_equal(stats_of(m), sum_in_order({stats_of(k01), compute_stats(parts[3])}, {0, 1}));
}

TEST_F(FedCgsMerge, NothingToMergeIsAnError) {
  EXPECT_THROW(method->merge({}, nullptr, ctx(0)), InputError);
  Features empty = all.subset({});
  EXPECT_THROW(method->merge({}, &empty, ctx(0)), InputError);
}

TEST_F(FedCgsMerge, IncompatibleKnowledgeIsRejected) {
  const Knowledge good = method->summarize(parts[0], ctx(0));
  Knowledge wrong_dim = good;
  wrong_dim.dim = 5;
  EXPECT_THROW(method->merge({wrong_dim}, &parts[1], ctx(1)), InputError);
  Knowledge wrong_backbone = good;
  wrong_backbone.backbone_fingerprint = "other";
  EXPECT_THROW(method->merge({wrong_backbone}, &parts[1], ctx(1)), InputError);
  Knowledge wrong_classes = good;
  wrong_classes.num_classes = 7;
  EXPECT_THROW(method->merge({wrong_classes}, &parts[1], ctx(1)), InputError);
  // The header claims the right shape but the payload does not have it.
  Knowledge bad_payload = good;
  std::get<StatsKnowledge>(bad_payload.payload).B = MatrixD::Zero(3, 3);
  EXPECT_THROW(method->merge({bad_payload}, &parts[1], ctx(1)), InputError);
  Knowledge asymmetric = good;
  std::get<StatsKnowledge>(asymmetric.payload).B(0, 1) += 1.0;
  EXPECT_THROW(method->merge({asymmetric}, &parts[1], ctx(1)), InputError);
  Knowledge nan = good;
  std::get<StatsKnowledge>(nan.payload).A(0, 0) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(method->merge({nan}, &parts[1], ctx(1)), InputError);
  Knowledge negative = good;
  std::get<StatsKnowledge>(negative.payload).N[0] = -1;
  EXPECT_THROW(method->merge({negative}, &parts[1], ctx(1)), InputError);
  // Local features of another dimension.
  const Features other = blobs(30, 6, 3, 4.0, 23);
  EXPECT_THROW(method->summarize(other, ctx(0)), InputError);
  EXPECT_THROW(method->merge({good}, &other, ctx(1)), InputError);
}

// Method::validate makes merge's checks on one piece, for a node to apply on arrival; and it
// refuses statistics no float32 features can produce, which would overflow the sum or the head.
TEST_F(FedCgsMerge, ValidateRefusesWhatMergeRefusesAndImpossibleMagnitudes) {
  const Knowledge good = method->summarize(parts[0], ctx(0));
  EXPECT_NO_THROW(method->validate(good, ctx(1), "piece"));
  Knowledge asymmetric = good;
  std::get<StatsKnowledge>(asymmetric.payload).B(0, 1) += 1.0;
  EXPECT_THROW(method->validate(asymmetric, ctx(1), "piece"), InputError);
  Knowledge wrong_dim = good;
  wrong_dim.dim = 5;
  EXPECT_THROW(method->validate(wrong_dim, ctx(1), "piece"), InputError);

  auto expect_refused = [&](const Knowledge& k, const std::string& mentions) {
    try {
      method->validate(k, ctx(1), "piece from node 0");
      ADD_FAILURE() << "accepted: expected an error mentioning " << mentions;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("piece from node 0"), std::string::npos) << e.what();
    }
    EXPECT_THROW(method->merge({k}, &parts[1], ctx(1)), InputError);
  };
  Knowledge huge_sum = good;
  std::get<StatsKnowledge>(huge_sum.payload).A(1, 2) = 1e308;
  expect_refused(huge_sum, "class sum A(1, 2)");
  // Just beyond Cauchy-Schwarz: (sum x)^2 > N_j * B_kk.
  Knowledge too_large = good;
  auto& s = std::get<StatsKnowledge>(too_large.payload);
  const Eigen::Index j = std::max_element(s.N.begin(), s.N.end()) - s.N.begin();
  ASSERT_GT(s.N[static_cast<size_t>(j)], 0);
  s.A(j, 0) = std::sqrt(static_cast<double>(s.N[static_cast<size_t>(j)]) * s.B(0, 0)) * 1.001;
  expect_refused(too_large, "class sum A(" + std::to_string(j) + ", 0)");
  Knowledge huge_gram = good;
  std::get<StatsKnowledge>(huge_gram.payload).B(3, 3) = 1e300;
  expect_refused(huge_gram, "float32 features");
}

TEST(FedCgsLda, SeparatedGaussiansAreClassifiedWithEitherCovariance) {
  const Features train = blobs(2000, 8, 5, 6.0, 31), test = blobs(1000, 8, 5, 6.0, 32);
  const StatsKnowledge s = compute_stats(train);
  for (LdaCovariance cov : {LdaCovariance::Total, LdaCovariance::Within}) {
    FedCgsOptions opt;
    opt.covariance = cov;
    LdaDiagnostics diag;
    const auto head = fit_lda_head(s, opt, &diag);
    EXPECT_EQ(head->kind(), "lda");
    EXPECT_GT(head->accuracy(test), 0.99);
    EXPECT_EQ(diag.ridge, 0.0);
    EXPECT_TRUE(diag.absent.empty());
  }
}

// Eq. 11 exactly as the paper writes it, for comparison with the centred form fednode uses.
Labels paper_predictions(const StatsKnowledge& s, const MatrixD& Sigma, const MatrixF& X) {
  const Eigen::MatrixXd inv = Eigen::MatrixXd(Sigma).inverse();
  const double N = static_cast<double>(total_count(s));
  Labels out;
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const Eigen::VectorXd x = X.row(i).cast<double>().transpose();
    double best = -std::numeric_limits<double>::infinity();
    int arg = -1;
    for (Eigen::Index j = 0; j < s.A.rows(); ++j) {
      const double nj = static_cast<double>(s.N[static_cast<size_t>(j)]);
      const Eigen::VectorXd mu = s.A.row(j).transpose() / nj;
      const Eigen::VectorXd w = inv * mu;
      const double score = w.dot(x) - 0.5 * mu.dot(w) + std::log(nj / N);
      if (score > best) best = score, arg = static_cast<int>(j);
    }
    out.push_back(arg);
  }
  return out;
}

TEST(FedCgsLda, CovariancesFollowTheirDefinitionsAndMatchEq11) {
  // Weak separation so that the two covariances and the priors all matter for predictions.
  const Features train = blobs(600, 4, 3, 1.0, 33), test = blobs(500, 4, 3, 1.0, 34);
  const StatsKnowledge s = compute_stats(train);
  const Eigen::Index n = train.size(), d = train.dim();
  const Eigen::MatrixXd X = train.X.cast<double>();
  const Eigen::RowVectorXd m = X.colwise().mean();
  Eigen::MatrixXd total = Eigen::MatrixXd::Zero(d, d), within = Eigen::MatrixXd::Zero(d, d);
  for (Eigen::Index i = 0; i < n; ++i) {
    const int c = train.y[static_cast<size_t>(i)];
    const Eigen::RowVectorXd mu = s.A.row(c) / static_cast<double>(s.N[static_cast<size_t>(c)]);
    total += (X.row(i) - m).transpose() * (X.row(i) - m);
    within += (X.row(i) - mu).transpose() * (X.row(i) - mu);
  }
  total /= static_cast<double>(n - 1);
  within /= static_cast<double>(n - 3);

  FedCgsOptions opt;
  opt.covariance = LdaCovariance::Total;
  const MatrixD St = lda_covariance(s, opt);
  EXPECT_LE(rel_diff(St, total), 1e-10);
  EXPECT_EQ(fit_lda_head(s, opt)->predict(test.X), paper_predictions(s, St, test.X));
  opt.covariance = LdaCovariance::Within;
  const MatrixD Sw = lda_covariance(s, opt);
  EXPECT_LE(rel_diff(Sw, within), 1e-10);
  EXPECT_EQ(fit_lda_head(s, opt)->predict(test.X), paper_predictions(s, Sw, test.X));
  EXPECT_GT(rel_diff(St, Sw), 0.01);  // the two options really are different covariances
}

// One scatter serves every shrinkage with the bits of a fit per shrinkage; LAPACK's factorisation
// gives the same head up to rounding.
TEST(FedCgsLda, OneScatterServesEveryShrinkage) {
  const StatsKnowledge s = compute_stats(blobs(300, 6, 3, 3.0, 35));
  FedCgsOptions opt;
  const LdaScatter eigen(s, opt), lapack(s, opt, LdaScatter::Factorisation::Lapack);
  for (double shrinkage : {0.0, 0.3, 1.0}) {
    opt.shrinkage = shrinkage;
    const auto fitted = fit_lda_head(s, opt);
    EXPECT_EQ(eigen.covariance(shrinkage), lda_covariance(s, opt)) << shrinkage;
    EXPECT_EQ(eigen.head(shrinkage)->weights(), fitted->weights()) << shrinkage;
    EXPECT_EQ(eigen.head(shrinkage)->bias(), fitted->bias()) << shrinkage;
    const auto other = lapack.head(shrinkage);
    EXPECT_LT((other->weights() - fitted->weights()).cwiseAbs().maxCoeff(), 1e-5 * fitted->weights().cwiseAbs().maxCoeff());
    EXPECT_LT((other->bias() - fitted->bias()).cwiseAbs().maxCoeff(), 1e-5 * fitted->bias().cwiseAbs().maxCoeff());
  }
  EXPECT_THROW(eigen.head(1.5), InputError);
}

TEST(FedCgsLda, FullShrinkageGivesScaledIdentity) {
  const StatsKnowledge s = compute_stats(blobs(300, 6, 3, 3.0, 35));
  for (LdaCovariance cov : {LdaCovariance::Total, LdaCovariance::Within}) {
    FedCgsOptions opt;
    opt.covariance = cov;
    const double trace = lda_covariance(s, opt).trace();
    opt.shrinkage = 1.0;
    const MatrixD S = lda_covariance(s, opt);
    EXPECT_TRUE(S.isApprox(Eigen::MatrixXd::Identity(6, 6) * (trace / 6.0), 1e-14));
    opt.shrinkage = 0.3;  // partial shrinkage keeps the trace
    EXPECT_NEAR(lda_covariance(s, opt).trace(), trace, 1e-12 * trace);
  }
  FedCgsOptions bad;
  bad.shrinkage = 1.5;
  EXPECT_THROW(make_fedcgs(bad), InputError);
  EXPECT_THROW(fit_lda_head(s, bad), InputError);
  bad.shrinkage = -0.1;
  EXPECT_THROW(make_fedcgs(bad), InputError);
}

TEST(FedCgsLda, AbsentClassesAreReportedAndNeverPredicted) {
  // Classes 1 and 4 of 5 are held by nobody.
  const Features train = blobs(400, 6, 5, 5.0, 36, {0, 2, 3}), test = blobs(400, 6, 5, 5.0, 37);
  const auto parts = partition(train, 3, 38);
  auto method = make_fedcgs(FedCgsOptions{});
  std::vector<std::string> messages;
  NodeContext ctx = ctx_for(2, train);
  ctx.progress = [&](const std::string& m) { messages.push_back(m); };
  std::vector<Knowledge> received = {method->summarize(parts[0], ctx_for(0, train)),
                                     method->summarize(parts[1], ctx_for(1, train))};
  const auto head = method->fit_head(received, &parts[2], ctx);
  const Knowledge merged = method->merge(received, &parts[2], ctx);
  EXPECT_EQ(absent_classes(stats_of(merged)), (std::vector<int>{1, 4}));
  const auto* linear = dynamic_cast<const LinearHead*>(head.get());
  ASSERT_NE(linear, nullptr);
  EXPECT_TRUE(linear->weights().allFinite());
  EXPECT_TRUE(linear->bias().allFinite());
  EXPECT_EQ(linear->bias()(1), std::numeric_limits<float>::lowest());
  EXPECT_TRUE(linear->weights().row(4).isZero(0.0f));
  const MatrixF scores = head->scores(test.X);
  EXPECT_TRUE(scores.allFinite());
  for (int32_t p : head->predict(test.X)) EXPECT_TRUE(p == 0 || p == 2 || p == 3) << p;
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_NE(messages[0].find("1, 4"), std::string::npos) << messages[0];
}

TEST(FedCgsLda, SingularCovarianceGetsARidgeAndStaysAccurate) {
  // A constant feature (a border pixel that is never lit) makes the covariance singular.
  Features train = blobs(600, 6, 3, 5.0, 39), test = blobs(300, 6, 3, 5.0, 40);
  train.X.col(5).setConstant(0.25f);
  test.X.col(5).setConstant(0.25f);
  LdaDiagnostics diag;
  for (LdaCovariance cov : {LdaCovariance::Total, LdaCovariance::Within}) {
    FedCgsOptions opt;
    opt.covariance = cov;
    const auto head = fit_lda_head(compute_stats(train), opt, &diag);
    EXPECT_GT(diag.ridge, 0.0);
    EXPECT_TRUE(head->weights().allFinite());
    EXPECT_LT(head->weights().col(5).cwiseAbs().maxCoeff(), 1e-3f);  // class means agree there
    EXPECT_GT(head->accuracy(test), 0.97);
  }
  // Fewer samples than dimensions.
  const Features few = blobs(8, 20, 2, 5.0, 41);
  const auto head = fit_lda_head(compute_stats(few), FedCgsOptions{}, &diag);
  EXPECT_GT(diag.ridge, 0.0);
  EXPECT_TRUE(head->weights().allFinite() && head->bias().allFinite());
  // Every feature constant: identity covariance, predictions by prior.
  Features flat = blobs(10, 3, 2, 0.0, 42);
  flat.X.setConstant(1.0f);
  const auto prior_head = fit_lda_head(compute_stats(flat), FedCgsOptions{}, &diag);
  EXPECT_TRUE(diag.identity);
  EXPECT_TRUE(prior_head->bias().allFinite());
  const std::vector<int64_t> counts = flat.class_counts();
  const int majority = counts[1] > counts[0] ? 1 : 0;
  for (int32_t p : prior_head->predict(flat.X)) EXPECT_EQ(p, majority);
}

// Features of wildly different sizes: one of 1e30 beside features of order 1 used to set the
// ridge (relative to the average variance) to ~1e49 and leave the head at chance.
TEST(FedCgsLda, TheSizeOfOneFeatureDoesNotMatter) {
  const Features train = blobs(900, 6, 3, 5.0, 43), test = blobs(300, 6, 3, 5.0, 44);
  const auto accuracy_at = [&](float size) {
    Features tr = train, te = test;
    tr.X.col(2) *= size;
    te.X.col(2) *= size;
    tr.X.col(4).setConstant(0.5f * size);  // and a constant feature of that size too
    te.X.col(4).setConstant(0.5f * size);
    return fit_lda_head(compute_stats(tr), FedCgsOptions{})->accuracy(te);
  };
  const double expected = accuracy_at(1.0f);
  EXPECT_GT(expected, 0.97);
  for (float size : {1e30f, 1e-30f}) EXPECT_NEAR(accuracy_at(size), expected, 0.01) << "size " << size;
}

TEST(FedCgsLda, NoSamplesIsAnError) {
  EXPECT_THROW(fit_lda_head(zero_stats(3, 4), FedCgsOptions{}), InputError);
  EXPECT_THROW(zero_stats(0, 4), InputError);
}

}  // namespace
}  // namespace fednode
