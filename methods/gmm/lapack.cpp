#include "methods/gmm/lapack.h"

#include "methods/blas_threads.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

// Fortran LAPACK as OpenBLAS exports it; the trailing lengths are gfortran's hidden arguments for
// the character ones.
extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t uplo_len);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
}

namespace fednode {
namespace {

int checked_size(Eigen::Index d, const char* what) {
  if (d > std::numeric_limits<int>::max() / std::max<Eigen::Index>(d, 1))
    throw std::length_error(std::string(what) + ": matrix too large for LAPACK's 32-bit indices");
  return static_cast<int>(d);
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
  return L.allFinite() && (L.diagonal().array() > 0).all();
}

MatrixD psd_projection(const MatrixD& S, double floor) {
  const int n = checked_size(S.rows(), "eigen-decomposition");
  if (n == 0) return MatrixD(0, 0);
  // Every eigenpair by divide and conquer (dsyevd: at d = 1 280, 0.36-0.46 s, where dsyevr asked
  // for only the eigenvalues above the floor took 0.49 s, finding them by bisection and inverse
  // iteration). float32 (ssyevd, 0.22 s) could not keep every eigenvalue above a floor of 1e-6.
  MatrixD a = S;  // row-major S read column-major is S; its eigenvectors come back column-major
  std::vector<double> w(static_cast<size_t>(n));
  int info = 0, lwork = -1, liwork = -1, iwork_size = 0;
  double work_size = 0;
  const BlasSingleThread single;  // the same bits whatever the core count (see lapack.h)
  dsyevd_("V", "U", &n, a.data(), &n, w.data(), &work_size, &lwork, &iwork_size, &liwork, &info, 1, 1);
  if (info != 0) throw std::runtime_error("dsyevd workspace query failed (info " + std::to_string(info) + ")");
  lwork = static_cast<int>(work_size);
  liwork = iwork_size;
  std::vector<double> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  dsyevd_("V", "U", &n, a.data(), &n, w.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
  if (info != 0) throw std::runtime_error("dsyevd failed to converge (info " + std::to_string(info) + ")");
  // V diag(max(lambda, floor)) V^T = floor I + B B^T, B the eigenvectors above the floor, each
  // scaled by sqrt(lambda - floor): the eigenvectors are orthonormal. Eigenvector j is row j
  // of `a` as stored, so B^T is the rows from `first` on.
  int first = 0;  // eigenvalues ascend
  while (first < n && !(w[static_cast<size_t>(first)] > floor)) ++first;
  const int m = n - first;
  for (int j = first; j < n; ++j) a.row(j) *= std::sqrt(w[static_cast<size_t>(j)] - floor);
  MatrixD out = MatrixD::Zero(n, n);
  if (m > 0)  // out = B B^T with B^T the m x n row-major block
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, n, m, 1.0, a.data() + static_cast<size_t>(first) * n, n, 0.0,
                out.data(), n);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) out(i, j) = out(j, i);
  out.diagonal().array() += floor;
  return out;
}

}  // namespace fednode
