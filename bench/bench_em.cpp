// EM against scikit-learn's GaussianMixture, measured in the same run on the same data and
// from the same initial parameters (fednode's k-means initialisation, handed to scikit-learn as
// weights_init / means_init / precisions_init), with the same tol, max_iter and reg_covar.
//
//   bench_em [--n 5000] [--d 512] [--d-full 64] [--k 10] [--types diag,full,spherical]
//            [--repeats 3] [--tol 1e-3] [--max-iter 100] [--reg-covar 1e-6] [--spread 2] [--seed 1]
//            [--threads 2] [--python /usr/bin/python3] [--script bench/ref_sklearn_gmm.py]
//            [--markdown FILE]
//
// Both sides run with the same thread count (OMP_NUM_THREADS and OPENBLAS_NUM_THREADS).
// The data imitates backbone features: a 20-cluster latent mixture (centres spread * N(0, I)
// in 24 dimensions, unit noise) pushed through a random linear map and a ReLU, with
// per-dimension scales and a little noise. Smaller spreads overlap more and need more
// EM iterations.
#include "core/elapsed.h"
#include "core/rng.h"
#include "methods/gmm/gmm.h"

#include "bench_common.h"

#include <Eigen/Cholesky>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <omp.h>
#include <unistd.h>

extern "C" void openblas_set_num_threads(int);

using namespace fednode;

namespace {

std::map<std::string, std::string> parse_args(int argc, char** argv) {
  static const std::vector<std::string> known = {
      "n", "d", "d-full", "k", "types", "repeats", "tol", "max-iter", "reg-covar", "spread",
      "seed", "threads", "python", "script", "markdown"};
  std::map<std::string, std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << "usage: bench_em [--n 5000] [--d 512] [--d-full 64 (full covariance)] [--k 10]\n"
                   "                [--types diag,full,spherical] [--repeats 3] [--tol 1e-3] [--max-iter 100]\n"
                   "                [--reg-covar 1e-6] [--spread 2] [--seed 1] [--threads 2]\n"
                   "                [--python /usr/bin/python3] [--script PATH] [--markdown FILE]\n";
      std::exit(0);
    }
    if (a.rfind("--", 0) != 0 || i + 1 >= argc ||
        std::find(known.begin(), known.end(), a.substr(2)) == known.end()) {
      std::cerr << "bench_em: unknown or incomplete option '" << a << "' (see --help)\n";
      std::exit(2);
    }
    out[a.substr(2)] = argv[++i];
  }
  return out;
}

std::string get(const std::map<std::string, std::string>& m, const std::string& k,
                const std::string& fallback) {
  auto it = m.find(k);
  return it == m.end() ? fallback : it->second;
}

MatrixF feature_like_data(int64_t n, int d, double spread, uint64_t seed) {
  const int r = 24, clusters = 20;
  Rng rng(seed);
  MatrixD centers(clusters, r), A(d, r);
  VectorD bias(d), scale(d);
  for (int c = 0; c < clusters; ++c)
    for (int j = 0; j < r; ++j) centers(c, j) = spread * rng.normal();
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < r; ++j) A(i, j) = rng.normal() / std::sqrt(static_cast<double>(r));
    bias[i] = 0.5 * rng.normal();
    scale[i] = std::exp(0.5 * rng.normal());
  }
  MatrixF X(n, d);
  VectorD z(r);
  for (int64_t s = 0; s < n; ++s) {
    const int c = static_cast<int>(rng.below(clusters));
    for (int j = 0; j < r; ++j) z[j] = centers(c, j) + rng.normal();
    const VectorD h = A * z + bias;
    for (int i = 0; i < d; ++i)
      X(s, i) = static_cast<float>(scale[i] * (std::max(h[i], 0.0) + 0.05 * rng.normal()));
  }
  return X;
}


using fednode::bench::json_number;
using fednode::bench::median;
using fednode::bench::run_reference;
using fednode::bench::write_raw;

struct Row {
  std::string type;
  int64_t n;
  int d, K;
  double ours_s, ref_s;
  double ours_cpu, ref_cpu;  // CPU seconds of all threads: steadier than wall time on a busy machine
  int ours_iter, ref_iter;
  double ours_ll, ref_ll;
};

Row run_case(CovarianceType type, int64_t n, int d, int K, const GmmOptions& base, int repeats,
             double spread, uint64_t seed, const std::string& python, const std::string& script) {
  GmmOptions opt = base;
  opt.components = K;
  opt.covariance = type;
  const MatrixF X = feature_like_data(n, d, spread, seed);
  Rng init_rng = Rng::stream(seed, Purpose::KMeansInit);
  const GaussianMixture init = initial_mixture(X, opt, init_rng);
  if (init.components() != K) throw std::runtime_error("initialisation lost components");

  char dir_template[] = "/tmp/bench_em.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (!dir) throw std::runtime_error("mkdtemp failed");
  const std::string base_dir = dir;
  {
    const MatrixD Xd = X.cast<double>();
    write_raw(base_dir + "/X.f64", Xd.data(), static_cast<size_t>(Xd.size()));
    write_raw(base_dir + "/weights.f64", init.weights.data(), static_cast<size_t>(K));
    write_raw(base_dir + "/means.f64", init.means.data(), static_cast<size_t>(init.means.size()));
    MatrixD precisions;
    if (type == CovarianceType::Full) {
      precisions.resize(static_cast<Eigen::Index>(K) * d, d);
      for (int k = 0; k < K; ++k) {
        const MatrixD S = init.covariances.block(static_cast<Eigen::Index>(k) * d, 0, d, d);
        precisions.block(static_cast<Eigen::Index>(k) * d, 0, d, d) =
            S.llt().solve(MatrixD::Identity(d, d));
      }
    } else {
      precisions = init.covariances.cwiseInverse();
    }
    write_raw(base_dir + "/precisions.f64", precisions.data(), static_cast<size_t>(precisions.size()));
  }

  Row row{to_string(type), n, d, K, 0, 0, 0, 0, 0, 0, 0, 0};
  std::ostringstream cmd;
  cmd.precision(17);
  cmd << python << " " << script << " --dir " << base_dir << " --n " << n << " --d " << d
      << " --k " << K << " --type " << to_string(type) << " --tol " << opt.tol << " --max-iter "
      << opt.max_iter << " --reg-covar " << opt.reg_covar << " --repeats 1";
  // fednode and scikit-learn take turns, so that both see the same background load.
  std::vector<double> ours, ref, ours_cpu, ref_cpu;
  GaussianMixture fitted;
  FitInfo info;
  std::string out;
  for (int r = 0; r < repeats; ++r) {
    const double c0 = fednode::bench::cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    fitted = fit_gmm_from(X, init, opt, &info);
    ours.push_back(seconds_since(t0));
    ours_cpu.push_back(fednode::bench::cpu_seconds() - c0);
    out = run_reference(cmd.str());
    ref.push_back(json_number(out, "seconds"));
    ref_cpu.push_back(json_number(out, "cpu_seconds"));
  }
  for (const char* f : {"X.f64", "weights.f64", "means.f64", "precisions.f64"})
    std::remove((base_dir + "/" + f).c_str());
  rmdir(base_dir.c_str());
  row.ours_s = median(ours);
  row.ours_iter = info.iterations;
  row.ours_ll = mean_log_likelihood(fitted, X);
  row.ref_s = median(ref);
  row.ours_cpu = median(ours_cpu);
  row.ref_cpu = median(ref_cpu);
  row.ref_iter = static_cast<int>(json_number(out, "iterations"));
  row.ref_ll = json_number(out, "mean_loglik");
  return row;
}

}  // namespace

int bench_main(int argc, char** argv) {
  try {
    const auto a = parse_args(argc, argv);
    const int threads = fednode::bench::parse_int("bench_em", "--threads", get(a, "threads", "2").c_str(), 1, 256);
    const std::string t = std::to_string(threads);
    setenv("OMP_NUM_THREADS", t.c_str(), 1);
    setenv("OPENBLAS_NUM_THREADS", t.c_str(), 1);
    setenv("MKL_NUM_THREADS", t.c_str(), 1);
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);

    const int64_t n = fednode::bench::parse_int("bench_em", "--n", get(a, "n", "5000").c_str(), 1, 10000000);
    const int d = fednode::bench::parse_int("bench_em", "--d", get(a, "d", "512").c_str(), 1, 16384);
    const int d_full = fednode::bench::parse_int("bench_em", "--d-full", get(a, "d-full", "64").c_str(), 1, 4096);
    const int K = fednode::bench::parse_int("bench_em", "--k", get(a, "k", "10").c_str(), 1, 1000);
    const int repeats = fednode::bench::parse_int("bench_em", "--repeats", get(a, "repeats", "3").c_str(), 1, 1000);
    const uint64_t seed = std::stoull(get(a, "seed", "1"));
    const double spread = std::stod(get(a, "spread", "2"));
    GmmOptions opt;
    opt.tol = std::stod(get(a, "tol", "1e-3"));
    opt.max_iter = fednode::bench::parse_int("bench_em", "--max-iter", get(a, "max-iter", "100").c_str(), 1, 100000);
    opt.reg_covar = std::stod(get(a, "reg-covar", "1e-6"));
    const std::string python = get(a, "python", "/usr/bin/python3");
    const std::string script = get(a, "script", std::string(FEDNODE_SOURCE_DIR) + "/bench/ref_sklearn_gmm.py");
    std::vector<std::string> types;
    {
      std::stringstream ss(get(a, "types", "diag,full,spherical"));
      std::string item;
      while (std::getline(ss, item, ',')) types.push_back(item);
    }

    std::vector<Row> rows;
    for (const auto& name : types) {
      const CovarianceType type = parse_covariance_type(name);
      const int dim = type == CovarianceType::Full ? d_full : d;
      std::cerr << "bench_em: " << name << " n=" << n << " d=" << dim << " K=" << K << " ...\n";
      rows.push_back(run_case(type, n, dim, K, opt, repeats, spread, seed, python, script));
    }

    std::ostringstream table;
    table << "| covariance | n | d | K | fednode s | sklearn s | speedup | iters fednode | iters sklearn "
             "| loglik fednode | loglik sklearn | loglik diff | CPU s fednode | CPU s sklearn | CPU ratio |\n"
          << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    char line[768];
    for (const auto& r : rows) {
      std::snprintf(line, sizeof line,
                    "| %s | %lld | %d | %d | %.4f | %.4f | %.2fx | %d | %d | %.6f | %.6f | %+.2e "
                    "| %.4f | %.4f | %.2fx |\n",
                    r.type.c_str(), static_cast<long long>(r.n), r.d, r.K, r.ours_s, r.ref_s,
                    r.ref_s / r.ours_s, r.ours_iter, r.ref_iter, r.ours_ll, r.ref_ll,
                    r.ours_ll - r.ref_ll, r.ours_cpu, r.ref_cpu, r.ref_cpu / r.ours_cpu);
      table << line;
    }
    std::cout << "EM, fednode vs scikit-learn GaussianMixture (same data, same initial parameters, "
              << "spread " << spread << ", tol " << opt.tol << ", max_iter " << opt.max_iter << ", reg_covar " << opt.reg_covar
              << ", " << threads << " threads, median of " << repeats << ")\n"
              << table.str();
    if (a.count("markdown")) {
      std::ofstream md(a.at("markdown"));
      md << table.str();
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_em: " << e.what() << "\n";
    return 1;
  }
}

int main(int argc, char** argv) {
  return fednode::bench::guarded("bench_em", [&] { return bench_main(argc, argv); });
}
