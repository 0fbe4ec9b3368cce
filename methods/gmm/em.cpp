// EM for Gaussian mixtures: initialisation from k-means clusters, the fused E+M pass, the
// M-step, and fit_gmm's n_init loop.
#include "methods/gmm/blocks.h"
#include "core/parallel.h"
#include "methods/gmm/density.h"
#include "methods/gmm/gmm.h"
#include "methods/gmm/simd_diag.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace fednode {

using gmm_detail::Index;

namespace {

// Sufficient statistics of one pass, in the offset coordinates.
//   diag:      S = [sum r x, sum r x^2]           (K x 2d)
//   spherical: S = sum r x (K x d), q = sum r |x|^2
//   full:      S = sum r (x - m_k) (K x d), second[k] = sum r (x - m_k)(x - m_k)^T (upper),
//              where m_k is the mean of the pass's E-step: a shift that keeps the
//              second moments free of cancellation.
struct Stats {
  MatrixD S;
  VectorD q;
  std::vector<MatrixD> second;
  VectorD nk;
  double ll = 0;

  void reset(CovarianceType type, int K, Index d) {
    S = MatrixD::Zero(K, type == CovarianceType::Diag ? 2 * d : d);
    q = VectorD::Zero(K);
    second.clear();
    if (type == CovarianceType::Full) second.assign(static_cast<size_t>(K), MatrixD::Zero(d, d));
    nk = VectorD::Zero(K);
    ll = 0;
  }
  void add(const Stats& o) {
    S += o.S;
    q += o.q;
    for (size_t k = 0; k < second.size(); ++k) second[k] += o.second[k];
    nk += o.nk;
    ll += o.ll;
  }
};

// Chunks for a pass: up to 8, fewer when the per-chunk statistics of full covariances would
// take more than 128 MiB together. Depends only on the problem size (see blocks.h).
Index pass_chunks(CovarianceType type, int K, Index n, Index d) {
  Index chunks = std::max<Index>(1, std::min<Index>(8, (n + 255) / 256));
  if (type == CovarianceType::Full) {
    const double bytes = static_cast<double>(K) * static_cast<double>(d * d) * 8.0;
    chunks = std::max<Index>(1, std::min<Index>(chunks, static_cast<Index>((128.0 * 1024 * 1024) / bytes)));
  }
  return chunks;
}

// One EM pass: E-step with the current parameters, accumulation of the M-step statistics.
Stats em_pass(const MatrixF& X, const VectorD& offset, const gmm_detail::ComponentDensity& dens,
              CovarianceType type) {
  const Index n = X.rows(), d = X.cols();
  const int K = dens.components();
  const Index width = dens.width();
  const auto chunks = gmm_detail::partition_rows(n, pass_chunks(type, K, n, d));
  std::vector<Stats> partial(chunks.size());
  const Index B = dens.rows_per_block();
  BlasSingleThread single;  // the passes call BLAS from several threads at once
  const double flops = 4.0 * static_cast<double>(n) * static_cast<double>(width + dens.scratch_width()) * K;
  for_each_chunk(chunks.size(), flops > gmm_detail::kParallelFlops, [&](size_t c) {
    Stats& st = partial[c];
    st.reset(type, K, d);
    gmm_detail::BlockWork work;
    std::vector<double> logp(static_cast<size_t>(B * K)), resp(static_cast<size_t>(B * K)), weighted;
    for (Index start = chunks[c].begin; start < chunks[c].end; start += B) {
      const Index rows = std::min(B, chunks[c].end - start);
      dens.evaluate_rows(X, start, rows, offset, work, logp.data());
      st.ll += gmm_detail::normalise_rows(logp.data(), rows, K, resp.data(), nullptr);
      for (Index i = 0; i < rows; ++i)
        for (int k = 0; k < K; ++k) st.nk[k] += resp[static_cast<size_t>(i * K + k)];
      switch (type) {
        case CovarianceType::Diag:
        case CovarianceType::Spherical:
          if (dens.uses_simd())
            gmm_detail::simd_mstep({X.data(), d, start, rows, offset.data()}, resp.data(), K,
                                   type == CovarianceType::Diag, st.S.data(), work.listed);
          else
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, static_cast<int>(width),
                        static_cast<int>(rows), 1.0, resp.data(), K, work.block.data(),
                        static_cast<int>(width), 1.0, st.S.data(), static_cast<int>(width));
          if (type == CovarianceType::Spherical)
            for (Index i = 0; i < rows; ++i)
              for (int k = 0; k < K; ++k)
                st.q[k] += resp[static_cast<size_t>(i * K + k)] * work.scratch[static_cast<size_t>(i)];
          break;
        case CovarianceType::Full: {
          weighted.resize(static_cast<size_t>(rows * d));
          for (int k = 0; k < K; ++k) {
            const double* mu = dens.means().data() + k * d;
            double* s = st.S.data() + k * d;
            // Rows with a responsibility of exactly zero (exp underflowed: separated components)
            // add exact zeros to both sums: only the others are weighted and multiplied.
            Index kept = 0;
            for (Index i = 0; i < rows; ++i) {
              const double r = resp[static_cast<size_t>(i * K + k)];
              if (r == 0.0) continue;
              const double sr = std::sqrt(r);
              const double* x = work.block.data() + i * d;
              double* w = weighted.data() + kept++ * d;
              for (Index j = 0; j < d; ++j) {
                const double t = x[j] - mu[j];
                s[j] += r * t;
                w[j] = sr * t;
              }
            }
            if (kept > 0)
              cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(d), static_cast<int>(kept), 1.0,
                          weighted.data(), static_cast<int>(d), 1.0, st.second[static_cast<size_t>(k)].data(),
                          static_cast<int>(d));
          }
          break;
        }
      }
    }
  });
  Stats total;
  total.reset(type, K, d);
  for (const auto& p : partial) total.add(p);
  return total;
}

// New parameters (in the data's coordinates) from a pass's statistics; drops collapsed
// components and renormalises the weights of the others.
GaussianMixture m_step(const Stats& st, const gmm_detail::ComponentDensity& dens,
                       const VectorD& offset, CovarianceType type, double reg, Index n,
                       int* dropped) {
  const int K = static_cast<int>(st.nk.size());
  const Index d = offset.size();
  std::vector<int> keep;
  for (int k = 0; k < K; ++k)
    if (st.nk[k] >= kCollapsedMass) keep.push_back(k);
  *dropped += K - static_cast<int>(keep.size());
  const int Kn = static_cast<int>(keep.size());
  GaussianMixture g;
  g.type = type;
  g.weights.resize(Kn);
  g.means.resize(Kn, d);
  switch (type) {
    case CovarianceType::Diag: g.covariances.resize(Kn, d); break;
    case CovarianceType::Spherical: g.covariances.resize(Kn, 1); break;
    case CovarianceType::Full: g.covariances.resize(Kn * d, d); break;
  }
  for (int a = 0; a < Kn; ++a) {
    const int k = keep[static_cast<size_t>(a)];
    const double nk = st.nk[k];
    g.weights[a] = nk / static_cast<double>(n);
    switch (type) {
      case CovarianceType::Diag:
        for (Index j = 0; j < d; ++j) {
          const double mu = st.S(k, j) / nk;
          g.means(a, j) = mu + offset[j];
          g.covariances(a, j) = std::max(st.S(k, d + j) / nk - mu * mu, 0.0) + reg;
        }
        break;
      case CovarianceType::Spherical: {
        double mu2 = 0;
        for (Index j = 0; j < d; ++j) {
          const double mu = st.S(k, j) / nk;
          mu2 += mu * mu;
          g.means(a, j) = mu + offset[j];
        }
        g.covariances(a, 0) = std::max(st.q[k] / nk - mu2, 0.0) / static_cast<double>(d) + reg;
        break;
      }
      case CovarianceType::Full: {
        const VectorD delta = st.S.row(k).transpose() / nk;
        const MatrixD& second = st.second[static_cast<size_t>(k)];
        for (Index j = 0; j < d; ++j) g.means(a, j) = dens.means()(k, j) + delta[j] + offset[j];
        auto cov = g.covariances.block(a * d, 0, d, d);
        for (Index i = 0; i < d; ++i)
          for (Index j = i; j < d; ++j) {
            const double v = second(i, j) / nk - delta[i] * delta[j];
            cov(i, j) = v;
            cov(j, i) = v;
          }
        cov.diagonal().array() += reg;
        break;
      }
    }
  }
  g.weights /= g.weights.sum();
  return g;
}

struct Prepared {
  VectorD offset;
  double reg = 0;
};

Prepared prepare(const MatrixF& X, const GmmOptions& options, const std::string& where) {
  if (X.rows() <= 0 || X.cols() <= 0)
    throw InputError(where + ": no data (" + std::to_string(X.rows()) + " x " +
                     std::to_string(X.cols()) + ")");
  validate_gmm_options(options, where);
  Prepared p;
  p.offset = gmm_detail::finite_column_means(X, where);
  p.reg = options.reg_covar;
  if (p.reg == 0) {
    // A positive floor so that duplicate points cannot give zero variances.
    double variance = 0;
    for (Index i = 0; i < X.rows(); ++i)
      for (Index j = 0; j < X.cols(); ++j) {
        const double t = static_cast<double>(X(i, j)) - p.offset[j];
        variance += t * t;
      }
    variance /= static_cast<double>(X.rows() * X.cols());
    p.reg = variance > 0 ? 1e-10 * variance : 1e-10;
  }
  return p;
}

GaussianMixture run_em(const MatrixF& X, const Prepared& p, GaussianMixture g,
                       const GmmOptions& options, FitInfo& info) {
  const Index n = X.rows();
  info.trace.clear();
  info.converged = false;
  info.iterations = 0;
  double previous = -std::numeric_limits<double>::infinity();
  for (int it = 1; it <= options.max_iter; ++it) {
    const gmm_detail::ComponentDensity dens(g, p.offset);
    info.regularised_covariances += dens.regularised();
    const Stats st = em_pass(X, p.offset, dens, g.type);
    const double lower_bound = st.ll / static_cast<double>(n);
    if (!std::isfinite(lower_bound))
      throw std::runtime_error("EM: log-likelihood became non-finite at iteration " +
                               std::to_string(it));
    info.trace.push_back(lower_bound);
    g = m_step(st, dens, p.offset, g.type, p.reg, n, &info.dropped_components);
    info.iterations = it;
    if (std::abs(lower_bound - previous) < options.tol) {
      info.converged = true;
      break;
    }
    previous = lower_bound;
  }
  info.lower_bound = info.trace.empty() ? 0.0 : info.trace.back();
  info.components = g.components();
  return g;
}

// The mixture of hard clusters (scikit-learn's initialisation from k-means labels).
GaussianMixture mixture_from_labels(const MatrixF& X, const Prepared& p,
                                    const std::vector<int32_t>& labels, int K,
                                    CovarianceType type) {
  const Index n = X.rows(), d = X.cols();
  std::vector<int64_t> counts(static_cast<size_t>(K), 0);
  MatrixD sums = MatrixD::Zero(K, d);
  for (Index i = 0; i < n; ++i) {
    const int k = labels[static_cast<size_t>(i)];
    ++counts[static_cast<size_t>(k)];
    for (Index j = 0; j < d; ++j) sums(k, j) += static_cast<double>(X(i, j)) - p.offset[j];
  }
  std::vector<int> keep;
  for (int k = 0; k < K; ++k)
    if (counts[static_cast<size_t>(k)] > 0) keep.push_back(k);
  const int Kn = static_cast<int>(keep.size());
  std::vector<int> slot(static_cast<size_t>(K), -1);
  for (int a = 0; a < Kn; ++a) slot[static_cast<size_t>(keep[static_cast<size_t>(a)])] = a;

  GaussianMixture g;
  g.type = type;
  g.weights.resize(Kn);
  MatrixD means(Kn, d);
  for (int a = 0; a < Kn; ++a) {
    const int k = keep[static_cast<size_t>(a)];
    g.weights[a] = static_cast<double>(counts[static_cast<size_t>(k)]) / static_cast<double>(n);
    means.row(a) = sums.row(k) / static_cast<double>(counts[static_cast<size_t>(k)]);
  }
  // Second moments about the cluster means (two passes: no cancellation).
  switch (type) {
    case CovarianceType::Diag:
    case CovarianceType::Spherical: {
      MatrixD var = MatrixD::Zero(Kn, d);
      for (Index i = 0; i < n; ++i) {
        const int a = slot[static_cast<size_t>(labels[static_cast<size_t>(i)])];
        for (Index j = 0; j < d; ++j) {
          const double t = static_cast<double>(X(i, j)) - p.offset[j] - means(a, j);
          var(a, j) += t * t;
        }
      }
      for (int a = 0; a < Kn; ++a)
        var.row(a) /= static_cast<double>(counts[static_cast<size_t>(keep[static_cast<size_t>(a)])]);
      if (type == CovarianceType::Diag) {
        g.covariances = var.array() + p.reg;
      } else {
        g.covariances.resize(Kn, 1);
        for (int a = 0; a < Kn; ++a) g.covariances(a, 0) = var.row(a).mean() + p.reg;
      }
      break;
    }
    case CovarianceType::Full: {
      g.covariances.resize(Kn * d, d);
      for (int a = 0; a < Kn; ++a) {
        const int k = keep[static_cast<size_t>(a)];
        const Index nk = counts[static_cast<size_t>(k)];
        MatrixD R(nk, d);
        Index r = 0;
        for (Index i = 0; i < n; ++i)
          if (labels[static_cast<size_t>(i)] == k) {
            for (Index j = 0; j < d; ++j) R(r, j) = static_cast<double>(X(i, j)) - p.offset[j] - means(a, j);
            ++r;
          }
        MatrixD S = MatrixD::Zero(d, d);
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(d),
                    static_cast<int>(nk), 1.0 / static_cast<double>(nk), R.data(),
                    static_cast<int>(d), 0.0, S.data(), static_cast<int>(d));
        for (Index i = 0; i < d; ++i)
          for (Index j = 0; j < i; ++j) S(i, j) = S(j, i);
        S.diagonal().array() += p.reg;
        g.covariances.block(a * d, 0, d, d) = S;
      }
      break;
    }
  }
  g.means = means.rowwise() + p.offset.transpose();
  return g;
}

GaussianMixture initial_mixture_prepared(const MatrixF& X, const Prepared& p,
                                         const GmmOptions& options, Rng& rng, int* iterations) {
  const int K = static_cast<int>(std::min<Index>(options.components, X.rows()));
  const KMeansResult km =
      kmeans(X, K, rng, options.init == GmmOptions::Init::KMeans, 300, 1e-4);
  if (iterations) *iterations = km.iterations;
  return mixture_from_labels(X, p, km.labels, static_cast<int>(km.centers.rows()),
                             options.covariance);
}

}  // namespace

void validate_gmm_options(const GmmOptions& o, const std::string& where) {
  if (o.components < 1 || o.components > 100000)
    throw InputError(where + ": number of mixture components must be in [1, 100000], got " +
                     std::to_string(o.components));
  if (!(o.reg_covar >= 0) || !std::isfinite(o.reg_covar))
    throw InputError(where + ": reg_covar must be a finite non-negative number");
  if (!(o.tol >= 0) || !std::isfinite(o.tol))
    throw InputError(where + ": tol must be a finite non-negative number");
  if (o.max_iter < 1) throw InputError(where + ": max_iter must be at least 1, got " +
                                       std::to_string(o.max_iter));
  if (o.n_init < 1) throw InputError(where + ": n_init must be at least 1, got " +
                                     std::to_string(o.n_init));
}

GaussianMixture initial_mixture(const MatrixF& X, const GmmOptions& options, Rng& rng,
                                int* kmeans_iterations) {
  const Prepared p = prepare(X, options, "GMM initialisation");
  return initial_mixture_prepared(X, p, options, rng, kmeans_iterations);
}

GaussianMixture fit_gmm(const MatrixF& X, const GmmOptions& options, uint64_t seed,
                        FitInfo* info) {
  const Prepared p = prepare(X, options, "GMM fit");
  Rng rng(seed);
  GaussianMixture best;
  FitInfo best_info;
  for (int init = 0; init < options.n_init; ++init) {
    FitInfo run;
    run.best_init = init;
    GaussianMixture g0 = initial_mixture_prepared(X, p, options, rng, &run.kmeans_iterations);
    GaussianMixture g = run_em(X, p, std::move(g0), options, run);
    if (init == 0 || run.lower_bound > best_info.lower_bound) {
      best = std::move(g);
      best_info = std::move(run);
    }
  }
  if (info) *info = std::move(best_info);
  return best;
}

GaussianMixture fit_gmm_from(const MatrixF& X, const GaussianMixture& init,
                             const GmmOptions& options, FitInfo* info) {
  const Prepared p = prepare(X, options, "GMM fit");
  init.validate("initial mixture");
  if (init.dim() != X.cols())
    throw InputError("initial mixture has dimension " + std::to_string(init.dim()) +
                     ", data has " + std::to_string(X.cols()));
  if (init.type != options.covariance)
    throw InputError(std::string("initial mixture is ") + to_string(init.type) +
                     ", options ask for " + to_string(options.covariance));
  FitInfo run;
  GaussianMixture g = run_em(X, p, init, options, run);
  if (info) *info = std::move(run);
  return g;
}

}  // namespace fednode
