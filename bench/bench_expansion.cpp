// FedCGS's feature expansion (features/expansion.h: max(0, X W^T)) against raw BLAS on the same
// data and the same W in the same run: cblas_sgemm into a preallocated matrix, then the ReLU.
// fednode's time includes drawing W and allocating its result; the reference is given W ready-made
// and writes into a matrix allocated once.
// Usage: bench_expansion [--n N] [--d D] [--dims D1,D2,...] [--reps R]
#include "features/expansion.h"
#include "core/rng.h"

#include "bench_common.h"

#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern "C" int openblas_get_num_threads(void);

int bench_main(int argc, char** argv) {
  using fednode::bench::seconds;
  int n = 20000, d = 1280, reps = 3;
  std::vector<int> dims = {2048, 4096};
  if (fednode::bench::wants_help(argc, argv)) {
    std::printf("usage: bench_expansion [--n 20000] [--d 1280] [--dims 2048,4096] [--reps 3]\n");
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_expansion: %s needs a value\n", flag.c_str());
      return 2;
    }
    const char* value = argv[++i];
    if (flag == "--n") n = fednode::bench::parse_int("bench_expansion", "--n", value);
    else if (flag == "--d") d = fednode::bench::parse_int("bench_expansion", "--d", value);
    else if (flag == "--reps") reps = fednode::bench::parse_int("bench_expansion", "--reps", value);
    else if (flag == "--dims") dims = fednode::bench::parse_int_list("bench_expansion", "--dims", value);
    else {
      std::fprintf(stderr, "usage: bench_expansion [--n N] [--d D] [--dims D1,D2] [--reps R]\n");
      return 2;
    }
  }

  // Features like a backbone's: non-negative, most of them small.
  fednode::Features f;
  f.num_classes = 10;
  f.X.resize(n, d);
  f.y.assign(static_cast<size_t>(n), 0);
  fednode::Rng rng = fednode::Rng::stream(2024, fednode::Purpose::Generic, 1, static_cast<uint64_t>(d));
  for (Eigen::Index i = 0; i < f.X.rows(); ++i)
    for (Eigen::Index j = 0; j < f.X.cols(); ++j) f.X(i, j) = static_cast<float>(std::max(0.0, rng.normal()));

  std::printf("feature expansion vs raw BLAS (sgemm + ReLU): n=%d, d=%d, best of %d, OpenBLAS threads=%d\n", n, d,
              reps, openblas_get_num_threads());
  std::printf("%6s | %12s %12s %8s | %12s %12s\n", "D", "fednode [s]", "sgemm [s]", "ratio", "of it: W [s]",
              "max|dZ|");
  for (int D : dims) {
    const fednode::FeatureExpansion e{D, 1};
    const fednode::MatrixF W = fednode::expansion_projection(d, e);
    fednode::MatrixF Z(n, D);
    fednode::Features out;
    // Interleaved, best of `reps`: both see the same machine load.
    double t_fed = 1e300, t_ref = 1e300, t_w = 1e300;
    for (int r = 0; r < reps; ++r) {
      t_w = std::min(t_w, seconds([&] { (void)fednode::expansion_projection(d, e); }));
      fednode::Features input = f;  // copied outside the clock: a caller hands its rows over (moved)
      t_fed = std::min(t_fed, seconds([&] { out = fednode::expand_features(std::move(input), e); }));
      t_ref = std::min(t_ref, seconds([&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, D, d, 1.0f, f.X.data(), d, W.data(), d, 0.0f,
                    Z.data(), D);
        Z = Z.cwiseMax(0.0f);
      }));
    }
    std::printf("%6d | %12.3f %12.3f %8.2f | %12.3f %12.3g\n", D, t_fed, t_ref, t_fed / t_ref, t_w,
                static_cast<double>((out.X - Z).cwiseAbs().maxCoeff()));
  }
  return 0;
}

int main(int argc, char** argv) {
  return fednode::bench::guarded("bench_expansion", [&] { return bench_main(argc, argv); });
}
