// k-means for EM initialisation: greedy k-means++ seeding and Lloyd iterations.
#include "methods/gmm/blocks.h"
#include "core/parallel.h"
#include "methods/gmm/gmm.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace fednode {

using gmm_detail::Index;

namespace {

// Exact squared distances from every row of X to row c of X. Exact (no expansion) so that a
// point equal to a chosen center is at distance 0 and can never be chosen again: this is how
// k-means++ discovers that there are fewer distinct points than K.
void distances_to_row(const MatrixF& X, Index c, std::vector<double>& out) {
  const Index n = X.rows(), d = X.cols();
  out.resize(static_cast<size_t>(n));
  const float* xc = X.data() + c * d;
  const auto chunks = gmm_detail::partition_rows(n, 8);
  for_each_chunk(chunks.size(), 3.0 * n * d > gmm_detail::kParallelFlops, [&](size_t k) {
    for (Index i = chunks[k].begin; i < chunks[k].end; ++i)
      out[static_cast<size_t>(i)] =
          (Eigen::Map<const VectorF>(X.data() + i * d, d).cast<double>() -
           Eigen::Map<const VectorF>(xc, d).cast<double>())
              .squaredNorm();
  });
}

// Indices of the seeds, at most K, all distinct points.
std::vector<Index> plusplus_seeds(const MatrixF& X, int K, Rng& rng) {
  const Index n = X.rows();
  std::vector<Index> seeds;
  seeds.push_back(static_cast<Index>(rng.below(static_cast<uint64_t>(n))));
  std::vector<double> closest, candidate, best, cumsum(static_cast<size_t>(n));
  distances_to_row(X, seeds[0], closest);
  double potential = std::accumulate(closest.begin(), closest.end(), 0.0);
  const int trials = 2 + static_cast<int>(std::log(static_cast<double>(K)));
  while (static_cast<int>(seeds.size()) < K && potential > 0) {
    std::partial_sum(closest.begin(), closest.end(), cumsum.begin());
    Index last_positive = n - 1;
    while (last_positive > 0 && closest[static_cast<size_t>(last_positive)] <= 0) --last_positive;
    double best_potential = std::numeric_limits<double>::infinity();
    Index best_index = -1;
    for (int t = 0; t < trials; ++t) {
      const double r = rng.uniform() * cumsum.back();
      Index idx = std::upper_bound(cumsum.begin(), cumsum.end(), r) - cumsum.begin();
      if (idx >= n || closest[static_cast<size_t>(idx)] <= 0) idx = last_positive;
      distances_to_row(X, idx, candidate);
      double pot = 0;
      for (Index i = 0; i < n; ++i)
        pot += std::min(closest[static_cast<size_t>(i)], candidate[static_cast<size_t>(i)]);
      if (pot < best_potential) {
        best_potential = pot;
        best_index = idx;
        best.swap(candidate);
      }
    }
    seeds.push_back(best_index);
    for (Index i = 0; i < n; ++i)
      closest[static_cast<size_t>(i)] =
          std::min(closest[static_cast<size_t>(i)], best[static_cast<size_t>(i)]);
    potential = best_potential;
  }
  return seeds;
}

struct AssignStats {
  MatrixD sums;                  // K x d, centered coordinates
  std::vector<int64_t> counts;   // K
};

// Nearest center (by the expanded distance, through one GEMM per block) for every row;
// per-chunk sums and counts of the rows assigned to each center.
void assign(const MatrixF& X, const VectorD& offset, const MatrixD& centers,
            std::vector<int32_t>& labels, std::vector<double>& dist2, AssignStats& total) {
  const Index n = X.rows(), d = X.cols();
  const int K = static_cast<int>(centers.rows());
  const VectorD cnorm = centers.rowwise().squaredNorm();
  const auto chunks = gmm_detail::partition_rows(n, 8);
  std::vector<AssignStats> stats(chunks.size());
  const Index B = gmm_detail::block_rows(d);
  labels.resize(static_cast<size_t>(n));
  dist2.resize(static_cast<size_t>(n));
  BlasSingleThread single;  // the passes call BLAS from several threads at once
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(d) * K;
  for_each_chunk(chunks.size(), flops > gmm_detail::kParallelFlops, [&](size_t c) {
    AssignStats& st = stats[c];
    st.sums = MatrixD::Zero(K, d);
    st.counts.assign(static_cast<size_t>(K), 0);
    std::vector<double> block(static_cast<size_t>(B * d)), G(static_cast<size_t>(B * K));
    for (Index start = chunks[c].begin; start < chunks[c].end; start += B) {
      const Index rows = std::min(B, chunks[c].end - start);
      gmm_detail::load_block(X, start, rows, offset, false, block.data());
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), K,
                  static_cast<int>(d), 1.0, block.data(), static_cast<int>(d), centers.data(),
                  static_cast<int>(d), 0.0, G.data(), K);
      for (Index i = 0; i < rows; ++i) {
        int best = 0;
        double best_score = std::numeric_limits<double>::infinity();
        for (int k = 0; k < K; ++k) {
          const double s = cnorm[k] - 2.0 * G[static_cast<size_t>(i * K + k)];
          if (s < best_score) {
            best_score = s;
            best = k;
          }
        }
        const double* x = block.data() + i * d;
        const double xnorm = Eigen::Map<const VectorD>(x, d).squaredNorm();
        labels[static_cast<size_t>(start + i)] = best;
        dist2[static_cast<size_t>(start + i)] = std::max(0.0, xnorm + best_score);
        double* s = st.sums.data() + best * d;
        for (Index j = 0; j < d; ++j) s[j] += x[j];
        ++st.counts[static_cast<size_t>(best)];
      }
    }
  });
  total.sums = MatrixD::Zero(K, d);
  total.counts.assign(static_cast<size_t>(K), 0);
  for (const auto& st : stats) {
    total.sums += st.sums;
    for (int k = 0; k < K; ++k) total.counts[static_cast<size_t>(k)] += st.counts[static_cast<size_t>(k)];
  }
}

// New centers as cluster means. An empty cluster takes over the point farthest from its
// center (as scikit-learn does); if every point sits on its center, the empty cluster is
// removed and the labels renumbered.
MatrixD update_centers(const MatrixF& X, const VectorD& offset, AssignStats& st,
                       std::vector<int32_t>& labels, const std::vector<double>& dist2) {
  const Index d = X.cols();
  int K = static_cast<int>(st.sums.rows());
  std::vector<int> empty;
  for (int k = 0; k < K; ++k)
    if (st.counts[static_cast<size_t>(k)] == 0) empty.push_back(k);
  std::vector<int> removed;
  if (!empty.empty()) {
    std::vector<Index> order(labels.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) {
      return dist2[static_cast<size_t>(a)] > dist2[static_cast<size_t>(b)];
    });
    size_t next = 0;
    for (int e : empty) {
      // Skip points that are alone in their cluster: moving them would empty another one.
      while (next < order.size() &&
             (dist2[static_cast<size_t>(order[next])] <= 0 ||
              st.counts[static_cast<size_t>(labels[static_cast<size_t>(order[next])])] <= 1))
        ++next;
      if (next == order.size()) {
        removed.push_back(e);
        continue;
      }
      const Index p = order[next++];
      const int old = labels[static_cast<size_t>(p)];
      for (Index j = 0; j < d; ++j) {
        const double x = static_cast<double>(X(p, j)) - offset[j];
        st.sums(old, j) -= x;
        st.sums(e, j) = x;
      }
      --st.counts[static_cast<size_t>(old)];
      st.counts[static_cast<size_t>(e)] = 1;
      labels[static_cast<size_t>(p)] = e;
    }
  }
  std::vector<int> remap(static_cast<size_t>(K), -1);
  int kept = 0;
  for (int k = 0; k < K; ++k)
    if (std::find(removed.begin(), removed.end(), k) == removed.end()) remap[static_cast<size_t>(k)] = kept++;
  MatrixD centers(kept, d);
  for (int k = 0; k < K; ++k) {
    const int r = remap[static_cast<size_t>(k)];
    if (r < 0) continue;
    centers.row(r) = st.sums.row(k) / static_cast<double>(st.counts[static_cast<size_t>(k)]);
  }
  if (!removed.empty())
    for (auto& l : labels) l = remap[static_cast<size_t>(l)];
  return centers;
}

}  // namespace

KMeansResult kmeans(const MatrixF& X, int K, Rng& rng, bool lloyd, int max_iter, double tol) {
  const Index n = X.rows(), d = X.cols();
  if (n <= 0 || d <= 0) throw InputError("k-means: no data (" + std::to_string(n) + " x " +
                                         std::to_string(d) + ")");
  if (K < 1) throw InputError("k-means: number of clusters must be at least 1, got " +
                              std::to_string(K));
  if (max_iter < 0) throw InputError("k-means: max_iter must be non-negative");
  const VectorD offset = gmm_detail::finite_column_means(X, "k-means input");

  const std::vector<Index> seeds = plusplus_seeds(X, static_cast<int>(std::min<Index>(K, n)), rng);
  MatrixD centers(static_cast<Index>(seeds.size()), d);
  for (size_t s = 0; s < seeds.size(); ++s)
    for (Index j = 0; j < d; ++j)
      centers(static_cast<Index>(s), j) = static_cast<double>(X(seeds[s], j)) - offset[j];

  KMeansResult out;
  std::vector<double> dist2;
  AssignStats st;
  assign(X, offset, centers, out.labels, dist2, st);
  if (lloyd) {
    double variance = 0;  // mean per-dimension variance, for the tolerance
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < d; ++j) {
        const double t = static_cast<double>(X(i, j)) - offset[j];
        variance += t * t;
      }
    variance /= static_cast<double>(n * d);
    const double tol_abs = tol * variance;
    std::vector<int32_t> previous;
    for (int it = 1; it <= max_iter; ++it) {
      MatrixD next = update_centers(X, offset, st, out.labels, dist2);
      const double shift =
          next.rows() == centers.rows() ? (next - centers).squaredNorm()
                                        : std::numeric_limits<double>::infinity();
      centers = std::move(next);
      previous = out.labels;
      assign(X, offset, centers, out.labels, dist2, st);
      out.iterations = it;
      if (out.labels == previous || shift <= tol_abs) break;
    }
  }
  out.centers = centers.rowwise() + offset.transpose();
  return out;
}

}  // namespace fednode
