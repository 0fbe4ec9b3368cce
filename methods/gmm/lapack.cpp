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
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda, double* b,
             const int* ldb, int* info, size_t uplo_len);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
void ssytrd_(const char* uplo, const int* n, float* a, const int* lda, float* d, float* e, float* tau, float* work,
             const int* lwork, int* info, size_t uplo_len);
void sstedc_(const char* compz, const int* n, float* d, float* e, float* z, const int* ldz, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t compz_len);
void sormtr_(const char* side, const char* uplo, const char* trans, const int* m, const int* n, const float* a,
             const int* lda, const float* tau, float* c, const int* ldc, float* work, const int* lwork, int* info,
             size_t side_len, size_t uplo_len, size_t trans_len);
}

namespace fednode {
namespace {

int checked_size(Eigen::Index d, const char* what) {
  if (d > std::numeric_limits<int>::max() / std::max<Eigen::Index>(d, 1))
    throw std::length_error(std::string(what) + ": matrix too large for LAPACK's 32-bit indices");
  return static_cast<int>(d);
}

void check_info(int info, const char* routine) {
  if (info != 0) throw std::runtime_error(std::string(routine) + " failed (info " + std::to_string(info) + ")");
}

// The eigenvalues of symmetric `a` in ascending order into w; `a` is overwritten by its
// eigenvectors as its rows (row-major `a` read column-major is `a`; the vectors come back
// column-major).
void symmetric_eigen(MatrixD& a, std::vector<double>& w) {
  const int n = static_cast<int>(a.rows());
  w.assign(static_cast<size_t>(n), 0.0);
  int info = 0, lwork = -1, liwork = -1, iwork_size = 0;
  double work_size = 0;
  const BlasSingleThread single;  // the same bits whatever the core count (see lapack.h)
  dsyevd_("V", "U", &n, a.data(), &n, w.data(), &work_size, &lwork, &iwork_size, &liwork, &info, 1, 1);
  check_info(info, "dsyevd workspace query");
  lwork = static_cast<int>(work_size);
  liwork = iwork_size;
  std::vector<double> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  dsyevd_("V", "U", &n, a.data(), &n, w.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
  check_info(info, "dsyevd");
}

// The index of the first of the ascending eigenvalues w above `floor` (w.size() if none is).
int first_above(const std::vector<double>& w, double floor) {
  int first = 0;
  while (first < static_cast<int>(w.size()) && !(w[static_cast<size_t>(first)] > floor)) ++first;
  return first;
}

// ssyevd's steps, with the last one for the wanted eigenvectors alone: the reduction to
// tridiagonal form (ssytrd), every eigenpair of the tridiagonal matrix (sstedc, divide and
// conquer), and the back-transformation (sormtr) of the `low` lowest eigenvectors and of those
// whose eigenvalues are above `floor`. The back-transformation is a third of ssyevd's time; a
// projection onto the PSD cone of a noisy covariance keeps about half the eigenvectors. Fills w
// with every eigenvalue, ascending, and `first` with the index of the first above the floor;
// returns the eigenvectors as rows, the low ones first.
MatrixF some_eigenvectors(MatrixF a, std::vector<double>& w, double floor, int low, int& first) {
  const int n = static_cast<int>(a.rows());
  std::vector<float> d(static_cast<size_t>(n)), e(static_cast<size_t>(std::max(n - 1, 1))), tau(e.size());
  int info = 0, query = -1, iwork_size = 0;
  float size = 0;
  const BlasSingleThread single;  // the same bits whatever the core count (see lapack.h)
  ssytrd_("U", &n, a.data(), &n, d.data(), e.data(), tau.data(), &size, &query, &info, 1);
  check_info(info, "ssytrd workspace query");
  std::vector<float> work(static_cast<size_t>(std::max(size, 1.0f)));
  int lwork = static_cast<int>(work.size());
  ssytrd_("U", &n, a.data(), &n, d.data(), e.data(), tau.data(), work.data(), &lwork, &info, 1);
  check_info(info, "ssytrd");

  MatrixF z(n, n);  // column-major: row j is the tridiagonal matrix's eigenvector j
  sstedc_("I", &n, d.data(), e.data(), z.data(), &n, &size, &query, &iwork_size, &query, &info, 1);
  check_info(info, "sstedc workspace query");
  work.resize(static_cast<size_t>(size));
  lwork = static_cast<int>(work.size());
  std::vector<int> iwork(static_cast<size_t>(std::max(iwork_size, 1)));
  int liwork = static_cast<int>(iwork.size());
  sstedc_("I", &n, d.data(), e.data(), z.data(), &n, work.data(), &lwork, iwork.data(), &liwork, &info, 1);
  check_info(info, "sstedc");
  w.assign(d.begin(), d.end());

  first = first_above(w, floor);
  low = std::min(std::max(low, 0), first);
  const int k = low + (n - first);
  MatrixF c(k, n);  // column-major n x k: the wanted vectors, transformed in place
  c.topRows(low) = z.topRows(low);
  c.bottomRows(n - first) = z.bottomRows(n - first);
  if (k == 0) return c;
  sormtr_("L", "U", "N", &n, &k, a.data(), &n, tau.data(), c.data(), &n, &size, &query, &info, 1, 1, 1);
  check_info(info, "sormtr workspace query");
  work.resize(static_cast<size_t>(size));
  lwork = static_cast<int>(work.size());
  sormtr_("L", "U", "N", &n, &k, a.data(), &n, tau.data(), c.data(), &n, work.data(), &lwork, &info, 1, 1, 1);
  check_info(info, "sormtr");
  return c;
}

// B^T for floor I + B B^T: the eigenvectors (rows of `vectors` from `from` on, eigenvalues w from
// `first` on), each scaled by sqrt(lambda - floor), in double.
template <typename Matrix>
MatrixD scaled_rows(const Matrix& vectors, int from, const std::vector<double>& w, int first, double floor) {
  const int m = static_cast<int>(vectors.rows()) - from;
  MatrixD b(m, vectors.cols());
  for (int j = 0; j < m; ++j)
    b.row(j) = vectors.row(from + j).template cast<double>() * std::sqrt(w[static_cast<size_t>(first + j)] - floor);
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

void lapack_cholesky_solve(const MatrixD& L, Eigen::MatrixXd& B) {
  const int n = checked_size(L.rows(), "Cholesky solve");
  const int m = checked_size(B.cols(), "Cholesky solve");
  if (B.rows() != L.rows()) throw std::invalid_argument("lapack_cholesky_solve: B has the wrong number of rows");
  if (n == 0 || m == 0) return;
  // Row-major L read column-major is L^T = U, and S = U^T U: dpotrs's upper form.
  int info = 0;
  const BlasSingleThread single;  // the same bits whatever the core count (see above)
  dpotrs_("U", &n, &m, L.data(), &n, B.data(), &n, &info, 1);
  check_info(info, "dpotrs");
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
  // Row by row, every probe at once: one read of S in storage order. (Eigen's product packed
  // all of S first and ran on OpenMP threads beside the caller's: half a factorisation's time.)
  VectorD form = VectorD::Zero(probes.rows());
  for (Eigen::Index i = 0; i < S.rows(); ++i) {
    const auto row = S.row(i);
    for (Eigen::Index p = 0; p < probes.rows(); ++p) form[p] += probes(p, i) * row.dot(probes.row(p));
  }
  for (Eigen::Index p = 0; p < probes.rows(); ++p)
    if (form[p] < -margin * probes.row(p).squaredNorm()) return true;
  return false;
}

MatrixD psd_projection(const MatrixD& S, double floor, EigenArithmetic arithmetic, MatrixD* at_floor,
                       int max_at_floor) {
  const int n = checked_size(S.rows(), "eigen-decomposition");
  if (at_floor) at_floor->resize(0, n);
  if (n == 0) return MatrixD(0, 0);
  // Divide and conquer (dsyevd: at d = 1 280, 0.36-0.46 s, where dsyevr asked for only the
  // eigenvalues above the floor took 0.49 s, finding them by bisection and inverse iteration;
  // ssyevd 0.18-0.22 s; its steps with only the kept eigenvectors transformed back, a fifth less).
  // V diag(max(lambda, floor)) V^T = floor I + B B^T, B the eigenvectors above the floor, each
  // scaled by sqrt(lambda - floor): the eigenvectors are orthonormal. Formed this way, in double,
  // the result's eigenvalues are at least `floor` even where single precision left the
  // eigenvectors slightly off orthonormal.
  std::vector<double> w;
  MatrixD b;
  const int low = at_floor ? std::max(max_at_floor, 0) : 0;
  if (arithmetic == EigenArithmetic::Double) {
    MatrixD vectors = S;
    symmetric_eigen(vectors, w);
    const int first = first_above(w, floor);
    b = scaled_rows(vectors, first, w, first, floor);
    if (at_floor) *at_floor = vectors.topRows(std::min(low, first));
  } else {
    int first = 0;
    const MatrixF vectors = some_eigenvectors(S.cast<float>(), w, floor, low, first);
    const int kept_low = static_cast<int>(vectors.rows()) - (n - first);
    b = scaled_rows(vectors, kept_low, w, first, floor);
    if (at_floor) *at_floor = vectors.topRows(kept_low).cast<double>();
  }
  const int m = static_cast<int>(b.rows());
  MatrixD out(n, n);
  if (m > 0) {  // the lower triangle of out = B B^T, B^T the m x n row-major b; beta 0 reads nothing
    const BlasSingleThread single;  // as the factorisations: the caller runs classes side by side
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, n, m, 1.0, b.data(), n, 0.0, out.data(), n);
  } else {
    out.setZero();
  }
  mirror_lower(out);
  out.diagonal().array() += floor;
  return out;
}

}  // namespace fednode
