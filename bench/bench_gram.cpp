// FedCGS's Gram accumulation (compute_stats: float32 features, chunks converted to double,
// dsyrk, plus the per-class sums) against raw BLAS on the same data in the same run:
//   dsyrk on the whole matrix already converted to double (the floor fednode can reach), and
//   ssyrk on the float32 matrix (faster, but float32 accumulation: shown for its error).
// Usage: bench_gram [--n N] [--dims D1,D2,...] [--classes C] [--reps R] [--chunk ROWS]
// (--chunk: rows per dsyrk call inside compute_stats; default its automatic choice)
#include "methods/fedcgs/stats.h"
#include "core/rng.h"

#include "bench_common.h"

#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" int openblas_get_num_threads(void);

namespace {

using fednode::MatrixD;
using fednode::MatrixF;
using fednode::bench::seconds;

// Largest |a - b| over the upper triangle (raw syrk fills only that one).
double max_upper_diff(const MatrixD& a, const MatrixD& b) {
  double m = 0;
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = i; j < a.cols(); ++j) m = std::max(m, std::abs(a(i, j) - b(i, j)));
  return m;
}

}  // namespace

int bench_main(int argc, char** argv) {
  int n = 20000, classes = 10, reps = 5, chunk = 0;
  std::vector<int> dims = {512, 1280};
  if (fednode::bench::wants_help(argc, argv)) {
    std::printf("usage: bench_gram [--n 20000] [--dims 512,1280] [--classes 10] [--reps 5] [--chunk ROWS (default: automatic)]\n");
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_gram: %s needs a value\n", flag.c_str());
      return 2;
    }
    const char* value = argv[++i];
    if (flag == "--n") n = fednode::bench::parse_int("bench_gram", "--n", value);
    else if (flag == "--classes") classes = fednode::bench::parse_int("bench_gram", "--classes", value);
    else if (flag == "--reps") reps = fednode::bench::parse_int("bench_gram", "--reps", value);
    else if (flag == "--chunk") chunk = fednode::bench::parse_int("bench_gram", "--chunk", value);
    else if (flag == "--dims") dims = fednode::bench::parse_int_list("bench_gram", "--dims", value);
    else {
      std::fprintf(stderr, "usage: bench_gram [--n N] [--dims D1,D2] [--classes C] [--reps R] [--chunk ROWS]\n");
      return 2;
    }
  }

  std::printf("FedCGS Gram accumulation vs raw BLAS: n=%d, classes=%d, best of %d, OpenBLAS threads=%d, chunk=%s\n",
              n, classes, reps, openblas_get_num_threads(), chunk ? std::to_string(chunk).c_str() : "auto");
  std::printf("%6s %8s | %12s %12s %8s | %12s %8s | %14s %14s\n", "d", "n", "fednode [s]", "dsyrk [s]",
              "ratio", "ssyrk [s]", "ratio", "max|dB| dsyrk", "max|dB| ssyrk");
  for (int d : dims) {
    // Features like a backbone's: non-negative (post-ReLU) with a class-dependent mean.
    fednode::Features f;
    f.num_classes = classes;
    f.X.resize(n, d);
    f.y.resize(static_cast<size_t>(n));
    fednode::Rng rng = fednode::Rng::stream(2024, fednode::Purpose::Generic, 0, static_cast<uint64_t>(d));
    for (int i = 0; i < n; ++i) {
      const int c = static_cast<int>(rng.below(static_cast<uint64_t>(classes)));
      f.y[static_cast<size_t>(i)] = c;
      for (int j = 0; j < d; ++j)
        f.X(i, j) = static_cast<float>(std::max(0.0, rng.normal() + (j % classes == c ? 1.0 : 0.0)));
    }
    const MatrixD Xd = f.X.cast<double>();

    fednode::StatsKnowledge stats;
    MatrixD Bd(d, d);
    MatrixF Bs(d, d);
    // Interleaved, best of `reps` each: on a shared machine load changes from second to second,
    // and taking turns exposes all three to the same conditions.
    double t_fed = 1e300, t_d = 1e300, t_s = 1e300;
    for (int r = 0; r < reps; ++r) {
      t_fed = std::min(t_fed, seconds([&] { stats = fednode::compute_stats(f, chunk); }));
      t_d = std::min(t_d, seconds([&] {
        Bd.setZero();
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, d, n, 1.0, Xd.data(), d, 0.0, Bd.data(), d);
      }));
      t_s = std::min(t_s, seconds([&] {
        Bs.setZero();
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, d, n, 1.0f, f.X.data(), d, 0.0f, Bs.data(), d);
      }));
    }
    const double diff_d = max_upper_diff(stats.B, Bd);
    const double diff_s = max_upper_diff(stats.B, Bs.cast<double>());
    std::printf("%6d %8d | %12.3f %12.3f %8.2f | %12.3f %8.2f | %14.3g %14.3g\n", d, n, t_fed, t_d,
                t_fed / t_d, t_s, t_fed / t_s, diff_d, diff_s);
    std::printf("%6s %8s   (max |B| = %.4g; fednode also forms the per-class sums A and the lower triangle)\n",
                "", "", stats.B.cwiseAbs().maxCoeff());
  }
  return 0;
}

int main(int argc, char** argv) {
  return fednode::bench::guarded("bench_gram", [&] { return bench_main(argc, argv); });
}
