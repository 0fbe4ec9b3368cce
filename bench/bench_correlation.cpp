// FedPFT's receiver-side correlation (within_class_correlation, --sample-correlation local)
// against its references in the same run, on the same data:
//   raw BLAS: dsyrk on the standardised residuals already formed in double (the floor: fednode
//   also forms them, from float32 features, and adds the Ledoit-Wolf weight and a Cholesky), and
//   scikit-learn: ledoit_wolf(Z, assume_centered=True) on those same residuals (the estimator
//   alone, again in its favour), with the difference in shrinkage and in the shrunk matrix.
// Usage: bench_correlation [--n N] [--dims D1,D2,...] [--classes C] [--reps R]
//        [--python /usr/bin/python3] [--script bench/ref_sklearn_ledoit_wolf.py]
#include "methods/fedpft/correlation.h"
#include "core/rng.h"

#include "../tests/common/temp_dir.h"
#include "bench_common.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

extern "C" int openblas_get_num_threads(void);

namespace {

using fednode::MatrixD;
using fednode::VectorD;

// Features like a backbone's: non-negative, a class-dependent mean, and within each class a
// correlation from a few shared factors (what the estimate is for).
fednode::Features correlated_features(int n, int d, int classes) {
  const int factors = 16;
  fednode::Rng rng = fednode::Rng::stream(2026, fednode::Purpose::Generic, 1, static_cast<uint64_t>(d));
  MatrixD A(d, factors);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < factors; ++j) A(i, j) = rng.normal() / std::sqrt(static_cast<double>(factors));
  fednode::Features f;
  f.num_classes = classes;
  f.X.resize(n, d);
  f.y.resize(static_cast<size_t>(n));
  VectorD z(factors);
  for (int s = 0; s < n; ++s) {
    const int c = static_cast<int>(rng.below(static_cast<uint64_t>(classes)));
    f.y[static_cast<size_t>(s)] = c;
    for (int j = 0; j < factors; ++j) z[j] = rng.normal();
    const VectorD h = A * z;
    for (int i = 0; i < d; ++i)
      f.X(s, i) = static_cast<float>(std::max(0.0, 1.0 + h[i] + 0.5 * rng.normal() + (i % classes == c ? 1.0 : 0.0)));
  }
  return f;
}

// The residuals within_class_correlation works on, formed the plain way: rows minus their class
// mean, each column scaled to unit (population) variance.
MatrixD standardised_residuals(const fednode::Features& f) {
  MatrixD Z = f.X.cast<double>();
  MatrixD means = MatrixD::Zero(f.num_classes, Z.cols());
  VectorD counts = VectorD::Zero(f.num_classes);
  for (Eigen::Index i = 0; i < Z.rows(); ++i) {
    means.row(f.y[static_cast<size_t>(i)]) += Z.row(i);
    counts[f.y[static_cast<size_t>(i)]] += 1;
  }
  for (int c = 0; c < f.num_classes; ++c)
    if (counts[c] > 0) means.row(c) /= counts[c];
  for (Eigen::Index i = 0; i < Z.rows(); ++i) Z.row(i) -= means.row(f.y[static_cast<size_t>(i)]);
  const VectorD inverse_sd = (Z.colwise().squaredNorm() / static_cast<double>(Z.rows())).cwiseSqrt().cwiseInverse();
  return Z * inverse_sd.asDiagonal();
}

}  // namespace

int bench_main(int argc, char** argv) {
  int n = 2000, classes = 10, reps = 3;
  std::vector<int> dims = {512, 1280};
  std::string python = "/usr/bin/python3";
  std::string script = std::string(FEDNODE_SOURCE_DIR) + "/bench/ref_sklearn_ledoit_wolf.py";
  const char* usage =
      "usage: bench_correlation [--n 2000] [--dims 512,1280] [--classes 10] [--reps 3]\n"
      "                         [--python /usr/bin/python3] [--script bench/ref_sklearn_ledoit_wolf.py]\n";
  if (fednode::bench::wants_help(argc, argv)) {
    std::printf("%s", usage);
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_correlation: %s needs a value\n", flag.c_str());
      return 2;
    }
    const char* value = argv[++i];
    if (flag == "--n") n = fednode::bench::parse_int("bench_correlation", "--n", value, 2, 1 << 24);
    else if (flag == "--classes") classes = fednode::bench::parse_int("bench_correlation", "--classes", value, 1, 1000);
    else if (flag == "--reps") reps = fednode::bench::parse_int("bench_correlation", "--reps", value, 1, 1000);
    else if (flag == "--dims") dims = fednode::bench::parse_int_list("bench_correlation", "--dims", value);
    else if (flag == "--python") python = value;
    else if (flag == "--script") script = value;
    else {
      std::fprintf(stderr, "%s", usage);
      return 2;
    }
  }
  const fednode::test::TempDir tmp("bench_correlation");  // removed on every exit, errors included
  const std::string dir = tmp.str();

  std::printf("Within-class correlation (Ledoit-Wolf) vs raw BLAS and scikit-learn: n=%d, classes=%d, "
              "median of %d, OpenBLAS threads=%d\n", n, classes, reps, openblas_get_num_threads());
  std::printf("| d | n | fednode s | dsyrk s | fednode / dsyrk | sklearn s | speedup | shrinkage fednode "
              "| shrinkage sklearn | max abs diff R |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (int d : dims) {
    const fednode::Features f = correlated_features(n, d, classes);
    const MatrixD Z = standardised_residuals(f);
    MatrixD S(d, d);
    fednode::WithinClassCorrelation ours;
    std::vector<double> t_ours, t_floor;
    // Taking turns exposes both to the same load on a shared machine.
    for (int r = 0; r < reps; ++r) {
      t_ours.push_back(fednode::bench::seconds([&] { ours = fednode::within_class_correlation(f); }));
      t_floor.push_back(fednode::bench::seconds([&] {
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, d, n, 1.0, Z.data(), d, 0.0, S.data(), d);
      }));
    }
    const MatrixD R = ours.factor * ours.factor.transpose();
    fednode::bench::write_raw(dir + "/Z.f64", Z.data(), static_cast<size_t>(Z.size()));
    fednode::bench::write_raw(dir + "/R.f64", R.data(), static_cast<size_t>(R.size()));
    const std::string out = fednode::bench::run_reference(
        python + " " + script + " --dir " + dir + " --n " + std::to_string(n) + " --d " + std::to_string(d) +
        " --repeats " + std::to_string(reps));
    const double ours_s = fednode::bench::median(t_ours), floor_s = fednode::bench::median(t_floor);
    const double ref_s = fednode::bench::json_number(out, "seconds");
    std::printf("| %d | %d | %.4f | %.4f | %.2f | %.4f | %.2fx | %.6f | %.6f | %.2e |\n", d, n, ours_s, floor_s,
                ours_s / floor_s, ref_s, ref_s / ours_s, ours.shrinkage,
                fednode::bench::json_number(out, "shrinkage"), fednode::bench::json_number(out, "max_abs_diff"));
  }
  return 0;
}

int main(int argc, char** argv) {
  return fednode::bench::guarded("bench_correlation", [&] { return bench_main(argc, argv); });
}
