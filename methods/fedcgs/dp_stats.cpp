#include "methods/fedcgs/dp_stats.h"

#include "methods/fedcgs/stats.h"

#include <cmath>
#include <cstdio>

namespace fednode {

StatsNoiseScale stats_noise_scale(const FedCgsOptions& o) {
  validate_dp_target(o.dp_epsilon, o.dp_delta, "DP-FedCGS");
  if (!(o.clip_norm > 0) || !std::isfinite(o.clip_norm))
    throw InputError("DP-FedCGS: the clipping norm must be a positive number, got " + std::to_string(o.clip_norm));
  const double total = o.dp_split[0] + o.dp_split[1] + o.dp_split[2];
  for (double share : o.dp_split)
    if (!(share > 0) || !std::isfinite(share))
      throw InputError("DP-FedCGS: every share of --dp-split must be positive");
  StatsNoiseScale s;
  s.rho = zcdp_rho_for(o.dp_epsilon, o.dp_delta);
  const auto sigma = [&](double sensitivity, double share) {
    return sensitivity / std::sqrt(2.0 * s.rho * share / total);
  };
  s.sigma_a = sigma(o.clip_norm, o.dp_split[0]);
  s.sigma_n = sigma(1.0, o.dp_split[1]);
  s.sigma_b = sigma(o.clip_norm * o.clip_norm, o.dp_split[2]);
  return s;
}

StatsKnowledge release_private_stats(const Features& local, const FedCgsOptions& o, const SecretKey32& key,
                                     NodeId node, int64_t* clipped, const std::array<double, 3>& shares) {
  StatsNoiseScale scale = stats_noise_scale(o);
  scale.sigma_a *= std::sqrt(shares[0]);
  scale.sigma_n *= std::sqrt(shares[1]);
  scale.sigma_b *= std::sqrt(shares[2]);
  Features f;
  f.X = local.X;
  f.y = local.y;
  f.num_classes = local.num_classes;
  int64_t scaled = 0;
  for (Eigen::Index i = 0; i < f.X.rows(); ++i) {
    const double norm = f.X.row(i).cast<double>().norm();
    if (norm > o.clip_norm) {
      // Rounding each entry to float32 moves the norm by at most 2^-24 of itself: aiming 2^-20
      // below R keeps the stored row within R, which the sensitivity relies on.
      f.X.row(i) *= static_cast<float>(o.clip_norm / norm * (1.0 - 0x1.0p-20));
      ++scaled;
    }
  }
  if (clipped) *clipped = scaled;
  StatsKnowledge s = compute_stats(f);

  SecretRng noise(key, Purpose::DpStatsNoise, node);
  for (Eigen::Index k = 0; k < s.A.size(); ++k) s.A.data()[k] += scale.sigma_a * noise.normal();
  for (int64_t& n : s.N) n += static_cast<int64_t>(std::llround(scale.sigma_n * noise.normal()));
  const Eigen::Index d = s.B.rows();
  for (Eigen::Index i = 0; i < d; ++i)
    for (Eigen::Index j = i; j < d; ++j) {
      s.B(i, j) += scale.sigma_b * noise.normal();
      s.B(j, i) = s.B(i, j);
    }
  s.noise.a = scale.sigma_a * scale.sigma_a;
  // Rounding a continuous count adds at most 1/2, about 1/12 in variance.
  s.noise.n = scale.sigma_n * scale.sigma_n + 1.0 / 12.0;
  s.noise.b = scale.sigma_b * scale.sigma_b;
  return s;
}

double distributed_noise_share(const FedCgsOptions& o, size_t members) {
  const long carriers = static_cast<long>(members) - 1 - o.dp_colluders;
  if (carriers < 1)
    throw InputError("distributed DP-FedCGS: a mask group of " + std::to_string(members) + " members cannot carry the noise against " +
                     std::to_string(o.dp_colluders) + " colluders and the member that reads the sum (--dp-colluders)");
  return 1.0 / static_cast<double>(carriers);
}

PrivacyRelease private_stats_release(const FedCgsOptions& o, size_t members, bool counts_only) {
  const StatsNoiseScale scale = stats_noise_scale(o);
  PrivacyRelease r = zcdp_release("statistics A, N, B", scale.rho, o.dp_delta);
  r.sensitivity = {o.clip_norm, 1.0, o.clip_norm * o.clip_norm};
  r.sigma = {scale.sigma_a, scale.sigma_n, scale.sigma_b};
  char clip[64];
  std::snprintf(clip, sizeof clip, "features clipped to norm %g", o.clip_norm);
  r.note = clip;
  if (members > 0) {
    // What the node adds: its share; the sums anyone can read carry at least the sigma above.
    const double share = std::sqrt(distributed_noise_share(o, members));
    r.mechanism += ", distributed over secure aggregation";
    if (!counts_only) r.sigma[0] *= share;
    r.sigma[1] *= share;
    if (!counts_only) r.sigma[2] *= share;
    r.note += "; noise shared among " + std::to_string(members) + " members: the bound holds for the sums, against the "
              "member reading them and up to " + std::to_string(o.dp_colluders) + " colluders";
  }
  return r;
}

}  // namespace fednode
