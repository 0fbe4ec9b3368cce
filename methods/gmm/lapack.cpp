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

// The eigenvalues of symmetric `a` in ascending order into w; `a` is overwritten by its
// eigenvectors as its rows (row-major `a` read column-major is `a`; the vectors come back
// column-major), in `a`'s own precision: the caller converts only the ones it keeps.
template <typename Matrix>
void symmetric_eigen(Matrix& a, std::vector<double>& w) {
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
}

// B^T for floor I + B B^T: the eigenvectors (rows of `vectors`) from `first` on, each scaled by
// sqrt(lambda - floor), in double.
template <typename Matrix>
MatrixD scaled_rows(const Matrix& vectors, const std::vector<double>& w, int first, double floor) {
  const int m = static_cast<int>(vectors.rows()) - first;
  MatrixD b(m, vectors.cols());
  for (int j = 0; j < m; ++j)
    b.row(j) = vectors.row(first + j).template cast<double>() * std::sqrt(w[static_cast<size_t>(first + j)] - floor);
  return b;
}

// Copies the lower triangle of square row-major `a` onto its upper one, a tile at a time so that
// the column reads stay in cache.
void mirror_lower(MatrixD& a) {
  constexpr Eigen::Index kTile = 64;
  const Eigen::Index n = a.rows();
  for (Eigen::Index i0 = 0; i0 < n; i0 += kTile)
    for (Eigen::Index j0 = i0; j0 < n; j0 += kTile)
      for (Eigen::Index i = i0; i < std::min(i0 + kTile, n); ++i)
        for (Eigen::Index j = std::max(j0, i + 1); j < std::min(j0 + kTile, n); ++j) a(i, j) = a(j, i);
}

}  // namespace

namespace {

// dpotrf on L in place (S's copy): true if every pivot was positive. A pivot that is NaN, zero or
// negative ends it with info > 0, and a non-finite entry of the factor makes a later pivot so: a
// factor dpotrf completes is finite with a positive diagonal.
bool factor_in_place(MatrixD& L) {
  const int n = checked_size(L.rows(), "Cholesky factorisation");
  if (n == 0) return true;
  // Row-major storage read as column-major is S^T = S; LAPACK's upper factor U (S = U^T U),
  // read back row-major, is U^T: the lower factor.
  int info = 0;
  const BlasSingleThread single;  // the same bits whatever the core count (see lapack.h)
  dpotrf_("U", &n, L.data(), &n, &info, 1);
  return info == 0;
}

}  // namespace

bool lapack_cholesky(const MatrixD& S, MatrixD& L) {
  L = S;
  if (!factor_in_place(L)) return false;
  L.triangularView<Eigen::StrictlyUpper>().setZero();
  return all_finite(L) && (L.diagonal().array() > 0).all();
}

bool lapack_positive_definite(const MatrixD& S) {
  MatrixD L = S;
  return factor_in_place(L) && (L.diagonal().array() > 0).all();
}

// A factorisation that completes has L L^T = S + E with |E| <= gamma_(d+1) |L| |L^T| (Higham,
// Accuracy and Stability of Numerical Algorithms, Theorem 10.3), and |L| |L^T| is at most
// max(diag S) entrywise, so S's least eigenvalue is at least -(d+1) d eps max(diag S). A form
// below four times that (which also covers the form's own rounding, d^2 eps max(diag S) for a
// unit v) cannot come from a matrix dpotrf accepts.
bool shown_not_positive_definite(const MatrixD& S, const MatrixD& probes) {
  if (probes.rows() == 0 || probes.cols() != S.rows() || S.rows() != S.cols()) return false;
  const double d = static_cast<double>(S.rows()), eps = std::numeric_limits<double>::epsilon();
  const double margin = 4.0 * (d + 1.0) * d * eps * S.diagonal().cwiseAbs().maxCoeff();
  const MatrixD SV = S * probes.transpose();
  for (Eigen::Index p = 0; p < probes.rows(); ++p)
    if (probes.row(p).dot(SV.col(p)) < -margin * probes.row(p).squaredNorm()) return true;
  return false;
}

MatrixD psd_projection(const MatrixD& S, double floor, EigenArithmetic arithmetic, MatrixD* at_floor,
                       int max_at_floor) {
  const int n = checked_size(S.rows(), "eigen-decomposition");
  if (at_floor) at_floor->resize(0, n);
  if (n == 0) return MatrixD(0, 0);
  // Every eigenpair by divide and conquer (dsyevd: at d = 1 280, 0.36-0.46 s, where dsyevr asked
  // for only the eigenvalues above the floor took 0.49 s, finding them by bisection and inverse
  // iteration; ssyevd 0.18-0.22 s). Eigenvector j comes back as row j of the row-major matrix.
  std::vector<double> w;
  MatrixD b;
  // V diag(max(lambda, floor)) V^T = floor I + B B^T, B the eigenvectors above the floor, each
  // scaled by sqrt(lambda - floor): the eigenvectors are orthonormal. Formed this way, in double,
  // the result's eigenvalues are at least `floor` even where single precision left the
  // eigenvectors slightly off orthonormal. B^T is the rows from `first` on (eigenvalues ascend).
  const auto above_floor = [&w, n, floor] {
    int first = 0;
    while (first < n && !(w[static_cast<size_t>(first)] > floor)) ++first;
    return first;
  };
  const auto keep = [&](const auto& vectors) {
    const int first = above_floor();
    b = scaled_rows(vectors, w, first, floor);
    if (at_floor) *at_floor = vectors.topRows(std::min(first, std::max(max_at_floor, 0))).template cast<double>();
  };
  if (arithmetic == EigenArithmetic::Double) {
    MatrixD vectors = S;
    symmetric_eigen(vectors, w);
    keep(vectors);
  } else {
    MatrixF vectors = S.cast<float>();
    symmetric_eigen(vectors, w);
    keep(vectors);
  }
  const int m = static_cast<int>(b.rows());
  MatrixD out(n, n);
  if (m > 0)  // the lower triangle of out = B B^T, B^T the m x n row-major b; beta 0 reads nothing
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, n, m, 1.0, b.data(), n, 0.0, out.data(), n);
  else
    out.setZero();
  mirror_lower(out);
  out.diagonal().array() += floor;
  return out;
}

}  // namespace fednode
