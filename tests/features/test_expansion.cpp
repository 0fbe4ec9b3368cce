// FedCGS's feature expansion: the shared random projection is the same for the same seed
// everywhere, is what the documentation says it is, and is refused where it cannot work.
#include "features/expansion.h"

#include "../common/expect_error.h"

#include <gtest/gtest.h>

#include <cmath>

namespace fednode {
namespace {

Features small_features() {
  Features f;
  f.X.resize(5, 3);
  f.X << 1, 0, 2,  //
      -1, 3, 0.5,  //
      0, 0, 0,     //
      4, -2, 1,    //
      0.25, 0.5, -3;
  f.y = {0, 1, 2, 1, 0};
  f.num_classes = 3;
  return f;
}

TEST(FeatureExpansion, IsReluOfTheSeededProjection) {
  const FeatureExpansion e{7, 42};
  const Features f = small_features();
  const MatrixF W = expansion_projection(f.dim(), e);
  ASSERT_EQ(W.rows(), 7);
  ASSERT_EQ(W.cols(), 3);
  const Features z = expand_features(f, e);
  ASSERT_EQ(z.X.rows(), 5);
  ASSERT_EQ(z.X.cols(), 7);
  EXPECT_EQ(z.y, f.y);
  EXPECT_EQ(z.num_classes, 3);
  for (int i = 0; i < 5; ++i)
    for (int k = 0; k < 7; ++k) {
      double dot = 0;
      for (int j = 0; j < 3; ++j) dot += double{W(k, j)} * f.X(i, j);
      EXPECT_NEAR(z.X(i, k), std::max(dot, 0.0), 1e-5) << i << "," << k;
    }
  EXPECT_TRUE((z.X.row(2).array() == 0).all());  // the zero vector stays zero
}

TEST(FeatureExpansion, SameSeedSameMatrixOtherSeedOtherMatrix) {
  const MatrixF a = expansion_projection(64, {256, 3});
  EXPECT_EQ(a, expansion_projection(64, {256, 3}));
  EXPECT_NE(a, expansion_projection(64, {256, 4}));
  // Entries are N(0, 1/d): the mean square of 16384 of them is 1/64 within a few percent.
  EXPECT_NEAR(a.squaredNorm() / static_cast<double>(a.size()), 1.0 / 64, 0.05 / 64);
  EXPECT_LT(std::abs(a.mean()), 4.0 / std::sqrt(static_cast<double>(a.size())) / 8);
}

TEST(FeatureExpansion, OffLeavesFeaturesAndFingerprintAlone) {
  const Features f = small_features();
  const Features same = expand_features(f, {});
  EXPECT_EQ(same.X, f.X);
  EXPECT_EQ(expanded_fingerprint("abc", {}), "abc");
}

TEST(FeatureExpansion, FingerprintNamesDimensionAndSeed) {
  EXPECT_EQ(expanded_fingerprint("pixels", {4096, 1}), "pixels+relu-projection-4096-seed-1");
  EXPECT_NE(expanded_fingerprint("pixels", {4096, 1}), expanded_fingerprint("pixels", {4096, 2}));
  EXPECT_NE(expanded_fingerprint("pixels", {4096, 1}), expanded_fingerprint("pixels", {2048, 1}));
}

TEST(FeatureExpansion, RefusesImpossibleDimensions) {
  test::expect_input_error([] { expansion_projection(3, {-1, 1}); }, {"[0, 16384]", "-1"});
  test::expect_input_error([] { expand_features(small_features(), {kMaxExpansionDim + 1, 1}); }, {"16385"});
  test::expect_input_error([] { expansion_projection(0, {8, 1}); }, {"dimension 0"});
}

}  // namespace
}  // namespace fednode
