// The shared within-class covariance sketch (FedPftOptions::SampleCorrelation::Shared): sketching a
// node's residuals, adding sketches of disjoint nodes, the correlation they stand for, and what a
// FedPFT node sends, forwards and draws with.
#include "methods/fedpft/correlation.h"
#include "methods/fedpft/fedpft_core.h"
#include "methods/fedpft/half.h"
#include "core/rng.h"

#include "../common/expect_error.h"
#include "../common/node_context.h"

#include <Eigen/Eigenvalues>
#include <gtest/gtest.h>

#include <cmath>

namespace fednode {
namespace {

// The covariance of every row minus its own node's class mean (classes of one row left out).
MatrixD pooled_within_class_covariance(const std::vector<const Features*>& nodes) {
  const Eigen::Index d = nodes.front()->dim();
  MatrixD W = MatrixD::Zero(d, d);
  int64_t m = 0;
  for (const Features* f : nodes)
    for (int c = 0; c < f->num_classes; ++c) {
      const MatrixD X = f->rows_of_class(c).cast<double>();
      if (X.rows() < 2) continue;
      const MatrixD centred = X.rowwise() - X.colwise().mean();
      W += centred.transpose() * centred;
      m += X.rows();
    }
  return W / static_cast<double>(m);
}

MatrixD to_correlation(const MatrixD& C) {
  const VectorD inv_sd = C.diagonal().cwiseSqrt().cwiseInverse();
  return inv_sd.asDiagonal() * C * inv_sd.asDiagonal();
}

// What a sketch stands for: factor^T factor plus the diagonal the factor leaves to each variance.
MatrixD covariance_of(const CovarianceSketch& s) {
  MatrixD C = s.factor.transpose() * s.factor;
  for (Eigen::Index j = 0; j < C.rows(); ++j) C(j, j) = std::max(C(j, j), s.variances[j]);
  return C;
}

// `classes` classes far apart whose residuals lie in a `rank`-dimensional subspace of R^d (the
// same loadings at every node, with `noise` added on every dimension), scaled per dimension.
Features low_rank_features(int d, int rank, int classes, int per_class, double noise, uint64_t loadings_seed,
                           uint64_t seed) {
  Rng lr(loadings_seed);
  MatrixD A(d, rank);
  for (Eigen::Index i = 0; i < A.size(); ++i) A.data()[i] = lr.normal() / std::sqrt(1.0 + static_cast<double>(i % rank));
  Rng rng(seed);
  Features f;
  f.num_classes = classes;
  f.X.resize(classes * per_class, d);
  for (int c = 0; c < classes; ++c)
    for (int i = 0; i < per_class; ++i) {
      VectorD g(rank);
      for (int k = 0; k < rank; ++k) g[k] = rng.normal();
      VectorD x = A * g;
      for (int j = 0; j < d; ++j) x[j] = (x[j] + noise * rng.normal()) * (1.0 + j % 3) + 5.0 * c;
      f.X.row(c * per_class + i) = x.cast<float>().transpose();
      f.y.push_back(c);
    }
  return f;
}

TEST(CovarianceSketch, ASketchAsWideAsTheResidualsIsExact) {
  // d = 60 and rank 8 takes the subspace iteration (8 + 16 < 30); d = 12 the dense solver.
  for (int d : {12, 60}) {
    const Features f = low_rank_features(d, 5, 3, 400, 0.0, 1, 2);
    const CovarianceSketch s = sketch_within_class(f, 8);
    EXPECT_EQ(s.residuals, 1200);
    const MatrixD exact = pooled_within_class_covariance({&f});
    EXPECT_TRUE(s.variances.isApprox(exact.diagonal(), 1e-5)) << "d = " << d;
    EXPECT_LE(s.factor.rows(), 8);
    EXPECT_TRUE(covariance_of(s).isApprox(exact, 1e-5)) << "d = " << d;
  }
}

TEST(CovarianceSketch, ANarrowSketchKeepsTheLeadingCorrelationAndEveryVariance) {
  const int d = 80;
  const Features f = low_rank_features(d, 20, 2, 1500, 0.3, 3, 4);
  const MatrixD R = to_correlation(pooled_within_class_covariance({&f}));
  Eigen::SelfAdjointEigenSolver<MatrixD> eig(R);
  const MatrixD U = eig.eigenvectors().rightCols(6);
  const MatrixD best = U * eig.eigenvalues().tail(6).asDiagonal() * U.transpose();  // rank-6 optimum

  const CovarianceSketch s = sketch_within_class(f, 6);  // subspace iteration: 6 + 16 < 40
  ASSERT_EQ(s.factor.rows(), 6);
  const VectorD inv_sd = s.variances.cwiseSqrt().cwiseInverse();
  const MatrixD Fs = s.factor * inv_sd.asDiagonal();
  EXPECT_LT((Fs.transpose() * Fs - best).norm(), 1e-6 * best.norm());
  EXPECT_TRUE(s.variances.isApprox(pooled_within_class_covariance({&f}).diagonal(), 1e-5));

  // Drawn with: unit diagonal, the leading part of the correlation, the rest left out.
  const WithinClassCorrelation c = correlation_of(s);
  const MatrixD drawn = c.factor * c.factor.transpose();
  EXPECT_LT((drawn.diagonal().array() - 1).abs().maxCoeff(), 1e-12);
  MatrixD expected = best;
  expected.diagonal().setOnes();
  EXPECT_LT((drawn - expected).norm(), 1e-6 * expected.norm());
}

TEST(CovarianceSketch, SketchesOfDisjointNodesAddUpToTheSketchOfTheirUnion) {
  const int d = 40;
  // Same residual subspace, different class means and counts at the two nodes.
  const Features a = low_rank_features(d, 4, 3, 300, 0.0, 5, 6);
  Features b = low_rank_features(d, 4, 2, 700, 0.0, 5, 7);
  b.num_classes = 3;
  b.X.array() += 2.0f;
  const CovarianceSketch sa = sketch_within_class(a, 10), sb = sketch_within_class(b, 10);
  const MatrixD exact = pooled_within_class_covariance({&a, &b});

  const CovarianceSketch both = combine_sketches({&sa, &sb}, 0);
  EXPECT_EQ(both.residuals, 900 + 1400);
  EXPECT_EQ(both.factor.rows(), sa.factor.rows() + sb.factor.rows());
  EXPECT_TRUE(covariance_of(both).isApprox(exact, 1e-5));

  // Forwarded at rank 4: nothing is lost, since the residuals span four directions.
  const CovarianceSketch forwarded = combine_sketches({&sa, &sb}, 4);
  EXPECT_EQ(forwarded.factor.rows(), 4);
  EXPECT_EQ(forwarded.variances, both.variances);
  EXPECT_TRUE(covariance_of(forwarded).isApprox(exact, 1e-5));
  // At rank 2 the variances stay exact and the rest of the correlation moves to the diagonal part.
  const CovarianceSketch narrow = combine_sketches({&sa, &sb}, 2);
  EXPECT_EQ(narrow.factor.rows(), 2);
  EXPECT_TRUE(covariance_of(narrow).diagonal().isApprox(exact.diagonal(), 1e-5));
  EXPECT_FALSE(covariance_of(narrow).isApprox(exact, 1e-2));
  // and what it keeps are the two leading directions of the union's correlation, not of its
  // covariance: dimensions of large variance do not crowd out the others.
  const MatrixD R = to_correlation(exact);
  Eigen::SelfAdjointEigenSolver<MatrixD> eig(R);
  const MatrixD U = eig.eigenvectors().rightCols(2);
  const MatrixD best = U * eig.eigenvalues().tail(2).asDiagonal() * U.transpose();
  const MatrixD kept = narrow.variances.cwiseSqrt().cwiseInverse().asDiagonal() * narrow.factor.transpose() *
                       narrow.factor * narrow.variances.cwiseSqrt().cwiseInverse().asDiagonal();
  EXPECT_LT((kept - best).norm(), 1e-5 * best.norm());

  // The order of the parts changes nothing but rounding.
  EXPECT_TRUE(covariance_of(combine_sketches({&sb, &sa}, 4)).isApprox(covariance_of(forwarded), 1e-9));
}

TEST(CovarianceSketch, ANodeWithoutAClassOfTwoRowsSendsAnEmptySketchThatAddsNothing) {
  Features lone;
  lone.num_classes = 3;
  lone.X = MatrixF::Constant(2, 6, 0.5f);
  lone.X(1, 3) = 2.0f;
  lone.y = {0, 2};
  const CovarianceSketch empty = sketch_within_class(lone, 4);
  EXPECT_EQ(empty.residuals, 0);
  EXPECT_EQ(empty.factor.rows(), 0);
  EXPECT_EQ(empty.variances, VectorD::Zero(6));
  EXPECT_EQ(correlation_of(empty).factor.size(), 0);

  const Features f = low_rank_features(6, 2, 3, 50, 0.1, 8, 9);
  const CovarianceSketch s = sketch_within_class(f, 4);
  const CovarianceSketch sum = combine_sketches({&empty, &s}, 4);
  EXPECT_EQ(sum.residuals, s.residuals);
  EXPECT_TRUE(covariance_of(sum).isApprox(covariance_of(s), 1e-12));
}

TEST(CovarianceSketch, ValidationNamesWhatIsWrong) {
  const Features f = low_rank_features(6, 2, 3, 50, 0.1, 8, 9);
  const CovarianceSketch good = sketch_within_class(f, 3);
  EXPECT_NO_THROW(validate_sketch(good, 6, 150, "piece"));
  test::expect_input_error([&] { validate_sketch(good, 6, 149, "piece"); }, {"150 residuals, outside [0, 149]"});
  test::expect_input_error([&] { validate_sketch(good, 7, 150, "piece"); }, {"6 variances, expected 7"});
  CovarianceSketch bad = good;
  bad.variances[2] = -1;
  test::expect_input_error([&] { validate_sketch(bad, 6, 150, "piece"); }, {"a variance is negative"});
  bad = good;
  bad.factor(0, 1) = std::nan("");
  test::expect_input_error([&] { validate_sketch(bad, 6, 150, "piece"); }, {"NaN or Inf"});
  bad = good;
  bad.factor = MatrixD::Zero(7, 6);
  test::expect_input_error([&] { validate_sketch(bad, 6, 150, "piece"); }, {"factor is 7x6"});
  bad = good;
  bad.residuals = 0;
  test::expect_input_error([&] { validate_sketch(bad, 6, 150, "piece"); }, {"summarises no residuals but is not empty"});
  test::expect_input_error([&] { sketch_within_class(f, 0); }, {"rank must be at least 1"});
}

NodeContext context(NodeId node) { return test::node_context(node, 3, 8, 17); }

FedPftOptions shared_options(int rank) {
  FedPftOptions o;
  o.gmm.components = 1;
  o.gmm.covariance = CovarianceType::Diag;
  o.sample_correlation = FedPftOptions::SampleCorrelation::Shared;
  o.correlation_rank = rank;
  return o;
}

TEST(CovarianceSketch, AFedPftNodeSendsItsSketchInTheTransferPrecisionAndForwardsTheSum) {
  const Features a = low_rank_features(8, 3, 3, 200, 0.2, 10, 11);
  const Features b = low_rank_features(8, 3, 3, 300, 0.2, 10, 12);
  FedPftOptions o = shared_options(2);
  const Knowledge ka = fedpft_summarize(a, o, context(0));
  const auto& sa = std::get<GmmKnowledge>(ka.payload).within_class;
  ASSERT_TRUE(sa.has_value());
  EXPECT_EQ(sa->residuals, 600);
  EXPECT_EQ(sa->factor.rows(), 2);
  EXPECT_EQ(round_sketch_to_half(*sa, "test").factor, sa->factor) << "float16 values, as they travel";

  // The chain's next node forwards one sketch of both nodes, at the same rank.
  const Knowledge merged = fedpft_merge({ka}, &b, o, context(1));
  const auto& sm = std::get<GmmKnowledge>(merged.payload).within_class;
  ASSERT_TRUE(sm.has_value());
  EXPECT_EQ(sm->residuals, 600 + 900);
  EXPECT_EQ(sm->factor.rows(), 2);
  const CovarianceSketch sb = sketch_within_class(b, 2);
  EXPECT_TRUE(sm->variances.isApprox(combine_sketches({&*sa, &sb}, 2).variances, 1e-3));

  // Without Shared nothing beyond the mixtures travels.
  FedPftOptions paper = o;
  paper.sample_correlation = FedPftOptions::SampleCorrelation::None;
  const Knowledge plain = fedpft_summarize(a, paper, context(0));
  EXPECT_FALSE(std::get<GmmKnowledge>(plain.payload).within_class.has_value());
  EXPECT_EQ(ka.payload_bytes(true) - plain.payload_bytes(true), (8 + 2 * 8) * 2 + 8);
}

TEST(CovarianceSketch, AHeadIsDrawnWithTheSendersCorrelationNotOnlyTheReceivers) {
  // The sender's residuals are correlated, the receiver's are not: Local draws with none, Shared
  // with the residual-weighted sum of both sketches.
  const Features sender = low_rank_features(8, 1, 3, 2000, 0.05, 13, 14);
  Features receiver = low_rank_features(8, 8, 3, 20, 0.0, 15, 16);
  Rng independent(31);
  for (Eigen::Index i = 0; i < receiver.X.rows(); ++i)
    for (Eigen::Index j = 0; j < 8; ++j)
      receiver.X(i, j) = static_cast<float>(0.3 * independent.normal() + 5.0 * receiver.y[static_cast<size_t>(i)]);
  FedPftOptions o = shared_options(8);
  o.half_precision = false;
  const Knowledge sent = fedpft_summarize(sender, o, context(0));
  const Features shared = fedpft_training_set({sent}, &receiver, o, context(1));
  o.sample_correlation = FedPftOptions::SampleCorrelation::Local;
  const Features local = fedpft_training_set({sent}, &receiver, o, context(1));

  const CovarianceSketch ss = *std::get<GmmKnowledge>(sent.payload).within_class;
  const CovarianceSketch sr = sketch_within_class(receiver, 8);
  const MatrixD expected = to_correlation(covariance_of(combine_sketches({&ss, &sr}, 0)));
  auto correlation_of_rows = [](const MatrixF& rows) {
    const MatrixD X = rows.cast<double>();
    const MatrixD centred = X.rowwise() - X.colwise().mean();
    return to_correlation(centred.transpose() * centred / static_cast<double>(X.rows() - 1));
  };
  const MatrixD drawn = correlation_of_rows(shared.X.topRows(2000));  // class 0's synthetic rows, K = 1
  EXPECT_LT((drawn - expected).cwiseAbs().maxCoeff(), 0.08);
  EXPECT_GT(std::abs(expected(0, 1)), 0.5) << "the sender's correlation dominates";
  const MatrixD drawn_local = correlation_of_rows(local.X.topRows(2000));
  EXPECT_LT(std::abs(drawn_local(0, 1)), 0.3) << "the receiver alone knows little of it";
  EXPECT_EQ(shared.X.bottomRows(receiver.size()), receiver.X) << "the real rows are untouched";
}

TEST(CovarianceSketch, SharedOptionsAreCheckedAndAPieceWithoutASketchIsNamed) {
  FedPftOptions o = shared_options(0);
  test::expect_input_error([&] { validate_fedpft_options(o, "opts"); }, {"correlation rank must be in [1, 4096], got 0"});
  o = shared_options(4);
  o.dp = true;
  test::expect_input_error([&] { validate_fedpft_options(o, "opts"); }, {"not differentially private"});

  const Features a = low_rank_features(8, 3, 3, 100, 0.2, 10, 11);
  FedPftOptions paper = shared_options(4);
  paper.sample_correlation = FedPftOptions::SampleCorrelation::None;
  const Knowledge plain = fedpft_summarize(a, paper, context(0));
  std::vector<std::string> said;
  NodeContext ctx = context(1);
  ctx.progress = [&](const std::string& s) { said.push_back(s); };
  const Features b = low_rank_features(8, 3, 3, 100, 0.2, 10, 12);
  auto times_named = [&] {
    int n = 0;
    for (const auto& s : said) n += s.find("knowledge from {0} carries no within-class covariance sketch") != std::string::npos;
    return n;
  };
  fedpft_merge({plain}, &b, shared_options(4), ctx);
  EXPECT_EQ(times_named(), 0) << "a chain node's merge and head see the same pieces: the head names them";
  fedpft_training_set({plain}, &b, shared_options(4), ctx);
  EXPECT_EQ(times_named(), 1);

  // A sketch claiming more residuals than its mixtures' samples is refused on receipt.
  Knowledge lying = fedpft_summarize(a, shared_options(4), context(0));
  std::get<GmmKnowledge>(lying.payload).within_class->residuals = 301;
  test::expect_input_error([&] { validate_gmm_knowledge(lying, context(1), "received knowledge #0"); },
                           {"301 residuals, outside [0, 300]"});
}

}  // namespace
}  // namespace fednode
