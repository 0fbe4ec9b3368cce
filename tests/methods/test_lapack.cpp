// The LAPACK wrappers against Eigen's own decompositions of the same matrices.
#include "methods/gmm/lapack.h"
#include "core/rng.h"

#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>

namespace fednode {
namespace {

MatrixD random_symmetric(Eigen::Index d, uint64_t seed) {
  Rng rng(seed);
  MatrixD S(d, d);
  for (Eigen::Index i = 0; i < d; ++i)
    for (Eigen::Index j = 0; j <= i; ++j) S(i, j) = S(j, i) = rng.normal();
  return S;
}

TEST(Lapack, PsdProjectionIsEigens) {
  const MatrixD S = random_symmetric(60, 1);
  Eigen::SelfAdjointEigenSolver<MatrixD> eig(S);
  const VectorD floored = eig.eigenvalues().cwiseMax(0.5);
  const MatrixD expected = eig.eigenvectors() * floored.asDiagonal() * eig.eigenvectors().transpose();
  const MatrixD projected = psd_projection(S, 0.5);
  ASSERT_EQ(projected.rows(), 60);
  EXPECT_LT((projected - expected).cwiseAbs().maxCoeff(), 1e-12 * eig.eigenvalues().cwiseAbs().maxCoeff());
  EXPECT_TRUE(projected.isApprox(projected.transpose(), 0.0)) << "exactly symmetric";
  Eigen::SelfAdjointEigenSolver<MatrixD> after(projected);
  EXPECT_GT(after.eigenvalues().minCoeff(), 0.5 - 1e-12);
  // Nothing above a floor above every eigenvalue: the floor times the identity.
  EXPECT_TRUE(psd_projection(S, 1e9).isApprox(1e9 * MatrixD::Identity(60, 60)));
}

// Single precision (what DP-FedPFT's float16 releases use): close to the double projection, to
// float32's precision of the largest eigenvalue, and still every eigenvalue at least the floor,
// a floor far below that precision included.
TEST(Lapack, SinglePrecisionProjectionKeepsTheFloor) {
  const MatrixD S = random_symmetric(200, 4);
  const MatrixD exact = psd_projection(S, 1e-6);
  const MatrixD single = psd_projection(S, 1e-6, EigenArithmetic::Single);
  const double largest = Eigen::SelfAdjointEigenSolver<MatrixD>(S).eigenvalues().cwiseAbs().maxCoeff();
  const double error = (single - exact).cwiseAbs().maxCoeff();
  EXPECT_LT(error, 1e-5 * largest);
  EXPECT_GT(error, 0.0) << "the single-precision path was taken";
  EXPECT_TRUE(single.isApprox(single.transpose(), 0.0)) << "exactly symmetric";
  EXPECT_GT(Eigen::SelfAdjointEigenSolver<MatrixD>(single).eigenvalues().minCoeff(), 1e-6 * (1 - 1e-6));
  MatrixD L;
  EXPECT_TRUE(lapack_cholesky(single, L));
}

TEST(Lapack, CholeskyIsLowerAndRefusesAnIndefiniteMatrix) {
  const MatrixD A = random_symmetric(50, 2);
  const MatrixD S = A * A.transpose() + MatrixD::Identity(50, 50);
  MatrixD L;
  ASSERT_TRUE(lapack_cholesky(S, L));
  EXPECT_TRUE(L.isLowerTriangular());
  EXPECT_LT((L * L.transpose() - S).cwiseAbs().maxCoeff(), 1e-9);
  const MatrixD eigen_L = Eigen::LLT<MatrixD>(S).matrixL();
  EXPECT_LT((L - eigen_L).cwiseAbs().maxCoeff(), 1e-9);
  EXPECT_FALSE(lapack_cholesky(random_symmetric(50, 3), L));
}

}  // namespace
}  // namespace fednode
