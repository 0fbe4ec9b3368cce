#include "methods/gmm/lapack.h"

#include "methods/blas_threads.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

// Fortran LAPACK as OpenBLAS exports it; the trailing lengths are gfortran's hidden arguments for
// the character ones.
extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t uplo_len);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
}

namespace fednode {
namespace {

int checked_size(Eigen::Index d, const char* what) {
  if (d > std::numeric_limits<int>::max() / std::max<Eigen::Index>(d, 1))
    throw std::length_error(std::string(what) + ": matrix too large for LAPACK's 32-bit indices");
  return static_cast<int>(d);
}

void syevd(const int* n, double* a, double* w, double* work, const int* lwork, int* iwork, const int* liwork,
           int* info) {
  dsyevd_("V", "U", n, a, n, w, work, lwork, iwork, liwork, info, 1, 1);
}
void syevd(const int* n, float* a, float* w, float* work, const int* lwork, int* iwork, const int* liwork,
           int* info) {
  ssyevd_("V", "U", n, a, n, w, work, lwork, iwork, liwork, info, 1, 1);
}

// The eigenvalues of symmetric `a` in ascending order into w, and its eigenvectors as the rows
// of the result (row-major `a` read column-major is `a`; the vectors come back column-major).
template <typename Matrix>
MatrixD symmetric_eigen(Matrix a, std::vector<double>& w) {
  using Scalar = typename Matrix::Scalar;
  const int n = static_cast<int>(a.rows());
  std::vector<Scalar> values(static_cast<size_t>(n));
  int info = 0, lwork = -1, liwork = -1, iwork_size = 0;
  Scalar work_size = 0;
  const BlasSingleThread single;  // the same bits whatever the core count (see lapack.h)
  syevd(&n, a.data(), values.data(), &work_size, &lwork, &iwork_size, &liwork, &info);
  if (info != 0) throw std::runtime_error("syevd workspace query failed (info " + std::to_string(info) + ")");
  lwork = static_cast<int>(work_size);
  liwork = iwork_size;
  std::vector<Scalar> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  syevd(&n, a.data(), values.data(), work.data(), &lwork, iwork.data(), &liwork, &info);
  if (info != 0) throw std::runtime_error("syevd failed to converge (info " + std::to_string(info) + ")");
  w.assign(values.begin(), values.end());
  if constexpr (std::is_same_v<Scalar, double>)
    return a;
  else
    return a.template cast<double>();
}

}  // namespace

bool lapack_cholesky(const MatrixD& S, MatrixD& L) {
  const int n = checked_size(S.rows(), "Cholesky factorisation");
  L = S;
  if (n == 0) return true;
  // Row-major storage read as column-major is S^T = S; LAPACK's upper factor U (S = U^T U),
  // read back row-major, is U^T: the lower factor.
  int info = 0;
  const BlasSingleThread single;  // the same bits whatever the core count (see lapack.h)
  dpotrf_("U", &n, L.data(), &n, &info, 1);
  if (info != 0) return false;
  L.triangularView<Eigen::StrictlyUpper>().setZero();
  return all_finite(L) && (L.diagonal().array() > 0).all();
}

MatrixD psd_projection(const MatrixD& S, double floor, EigenArithmetic arithmetic) {
  const int n = checked_size(S.rows(), "eigen-decomposition");
  if (n == 0) return MatrixD(0, 0);
  // Every eigenpair by divide and conquer (dsyevd: at d = 1 280, 0.36-0.46 s, where dsyevr asked
  // for only the eigenvalues above the floor took 0.49 s, finding them by bisection and inverse
  // iteration; ssyevd 0.18-0.22 s). Eigenvector j comes back as row j of the row-major matrix.
  std::vector<double> w;
  const MatrixD vectors = arithmetic == EigenArithmetic::Double ? symmetric_eigen(S, w)
                                                                : symmetric_eigen(MatrixF(S.cast<float>()), w);
  // V diag(max(lambda, floor)) V^T = floor I + B B^T, B the eigenvectors above the floor, each
  // scaled by sqrt(lambda - floor): the eigenvectors are orthonormal. Formed this way, in double,
  // the result's eigenvalues are at least `floor` even where single precision left the
  // eigenvectors slightly off orthonormal. B^T is the rows from `first` on.
  int first = 0;  // eigenvalues ascend
  while (first < n && !(w[static_cast<size_t>(first)] > floor)) ++first;
  const int m = n - first;
  MatrixD b = vectors.bottomRows(m);
  for (int j = 0; j < m; ++j) b.row(j) *= std::sqrt(w[static_cast<size_t>(first + j)] - floor);
  MatrixD out = MatrixD::Zero(n, n);
  if (m > 0)  // out = B B^T with B^T the m x n row-major block
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, n, m, 1.0, b.data(), n, 0.0, out.data(), n);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) out(i, j) = out(j, i);
  out.diagonal().array() += floor;
  return out;
}

}  // namespace fednode
