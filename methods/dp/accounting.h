// What a node's messages reveal about its data, release by release, and the node's total
// (docs/privacy.md, "The ledger"). Gaussian mechanisms are accounted in zero-concentrated DP
// (Bun & Steinke 2016): a release of L2 sensitivity D with noise N(0, s^2) per entry is
// rho = D^2 / (2 s^2)-zCDP, rhos add under composition, and rho-zCDP implies
// (rho + 2 sqrt(rho ln(1/delta)), delta)-DP for every delta. Releases proven (epsilon, delta)-DP
// directly (DP-FedPFT's Theorem 4.1) compose by adding epsilons and deltas. Neighbouring data
// sets differ by one sample (its features and its label) added or removed.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace fednode {

// Throws InputError naming `where` unless epsilon > 0 and 0 < delta < 1 (both finite).
void validate_dp_target(double epsilon, double delta, const std::string& where);

// The largest rho whose conversion at `delta` gives at most `epsilon`:
// rho = (sqrt(ln(1/delta) + epsilon) - sqrt(ln(1/delta)))^2.
double zcdp_rho_for(double epsilon, double delta);
// rho + 2 sqrt(rho ln(1/delta)); infinity for an infinite rho.
double zcdp_epsilon(double rho, double delta);
// D^2 / (2 sigma^2).
double gaussian_rho(double sensitivity, double sigma);

constexpr double kNotPrivate = std::numeric_limits<double>::infinity();

// One release: something derived from the node's own data that left the node, however many
// messages carried it (a resend or the ring's second pass carries the same values: the noise is
// drawn once per run, core/secret_rng.h).
struct PrivacyRelease {
  std::string what;       // "statistics A, N, B", "class 3: Gaussian", "head"
  std::string mechanism;  // "gaussian (zCDP)", "gaussian (FedPFT Theorem 4.1)", "none", "withheld"
  // Whose data: the classes it is computed from; empty means every class. Releases of disjoint
  // classes compose in parallel (one sample is in one class), so they do not add up.
  std::vector<int> classes;
  double rho = 0;           // zCDP releases; 0 otherwise
  // (epsilon, delta)-DP releases: their guarantee; zCDP releases: rho converted at their delta.
  // kNotPrivate for mechanism "none".
  double epsilon = 0;
  double delta = 0;
  // Per part of the release (DP-FedCGS: A, N, B): the L2 sensitivity of what the noise is added
  // to, and the noise's standard deviation (informational).
  std::vector<double> sensitivity;
  std::vector<double> sigma;
  std::string note;         // why, for a withheld class or a release that is not private
  std::vector<int> to;      // who received it (node ids), filled in by the node
};

struct PrivacyTotal {
  double epsilon = 0;   // kNotPrivate when any release is not private
  double delta = 0;
  double rho = 0;       // the zCDP part, before conversion
};

// A zCDP release of `rho`, converted at `delta` for display.
PrivacyRelease zcdp_release(std::string what, double rho, double delta);

// The node's total over `releases` for data of `num_classes` classes: per class, the zCDP
// releases covering it add their rho (converted once, at the largest of their deltas) and the
// other releases add their epsilons and deltas; the total is the worst class. Withheld releases
// cost nothing.
PrivacyTotal compose(const std::vector<PrivacyRelease>& releases, int num_classes);

}  // namespace fednode
