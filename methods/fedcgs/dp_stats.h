// DP-FedCGS (docs/privacy.md, "DP-FedCGS"): the statistics a node releases about its own data,
// through the Gaussian mechanism. Every feature is scaled down to ||f||_2 <= R (clip_norm); one
// sample added or removed then moves A by at most R (one row), N by 1 (one entry) and B's upper
// triangle by at most ||f f^T||_F = ||f||^2 <= R^2, so noise of standard deviation
//   sigma_A = R / sqrt(2 rho_A),  sigma_N = 1 / sqrt(2 rho_N),  sigma_B = R^2 / sqrt(2 rho_B)
// on every entry of A, N and B's upper triangle (mirrored) makes the release
// rho = rho_A + rho_N + rho_B - zCDP, with rho chosen to give (epsilon, delta)-DP
// (methods/dp/accounting.h) and shared between the three by FedCgsOptions::dp_split. Every class
// is released, held or not: a row only for classes present would say which classes a node holds.
#pragma once

#include "core/secret_rng.h"
#include "methods/dp/accounting.h"
#include "methods/method.h"

#include <array>

namespace fednode {

struct StatsNoiseScale {
  double rho = 0;                            // of the whole release
  double sigma_a = 0, sigma_n = 0, sigma_b = 0;
};
// Throws InputError naming what is wrong for options out of range.
StatsNoiseScale stats_noise_scale(const FedCgsOptions& options);

// The release: the statistics of `local` with every row clipped to clip_norm, noise drawn from
// SecretRng(key, DpStatsNoise, node) in the order A (row-major), N, B's upper triangle row by
// row; counts rounded to integers after the noise (post-processing). `clipped`, when not null,
// receives how many rows were scaled down.
// `shares` scales the noise variance of A, N and B (distributed DP: a member's share of the sum's
// noise; 1 without it).
StatsKnowledge release_private_stats(const Features& local, const FedCgsOptions& options, const SecretKey32& key,
                                     NodeId node, int64_t* clipped = nullptr,
                                     const std::array<double, 3>& shares = {1.0, 1.0, 1.0});

// Distributed DP: the share of the noise variance each of `members` adds to a masked part, so that
// the others' noise in any sum a coalition of the reader and `options.dp_colluders` members reads
// is the full noise. Throws InputError when too few members are left to carry it.
double distributed_noise_share(const FedCgsOptions& options, size_t members);

// The ledger's entry for that release; `members` > 0 for distributed DP over that many members
// (with `counts_only`, N alone is distributed: A and B travel plain with the full noise).
PrivacyRelease private_stats_release(const FedCgsOptions& options, size_t members = 0, bool counts_only = false);

}  // namespace fednode
