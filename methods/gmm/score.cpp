// Per-sample log-likelihood of data under a mixture.
#include "methods/gmm/blocks.h"
#include "core/parallel.h"
#include "methods/gmm/density.h"
#include "methods/gmm/gmm.h"

namespace fednode {

using gmm_detail::Index;

VectorD score_samples(const GaussianMixture& g, const MatrixF& X) {
  g.validate("mixture to score with");
  if (X.cols() != g.dim())
    throw InputError("scoring data of dimension " + std::to_string(X.cols()) +
                     " with a mixture of dimension " + std::to_string(g.dim()));
  gmm_detail::require_finite(X, "data to score");
  const Index n = X.rows();
  VectorD out(n);
  if (n == 0) return out;
  // The mixture's mean as the block offset keeps the expanded quadratic forms small.
  const VectorD offset = (g.means.transpose() * g.weights) / g.weights.sum();
  const gmm_detail::ComponentDensity dens(g, offset);
  const int K = dens.components();
  const Index width = dens.width();
  const Index B = dens.rows_per_block();
  const auto chunks = gmm_detail::partition_rows(n, 8);
  BlasSingleThread single;  // the passes call BLAS from several threads at once
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(width + dens.scratch_width()) * K;
  for_each_chunk(chunks.size(), flops > gmm_detail::kParallelFlops, [&](size_t c) {
    gmm_detail::BlockWork work;
    std::vector<double> logp(static_cast<size_t>(B * K));
    for (Index start = chunks[c].begin; start < chunks[c].end; start += B) {
      const Index rows = std::min(B, chunks[c].end - start);
      dens.evaluate_rows(X, start, rows, offset, work, logp.data());
      gmm_detail::normalise_rows(logp.data(), rows, K, nullptr, out.data() + start);
    }
  });
  return out;
}

double mean_log_likelihood(const GaussianMixture& g, const MatrixF& X) {
  if (X.rows() == 0) throw InputError("mean log-likelihood of an empty data set");
  return score_samples(g, X).mean();
}

}  // namespace fednode
