#include "methods/dp/accounting.h"

#include "core/types.h"

#include <algorithm>
#include <cmath>

namespace fednode {

void validate_dp_target(double epsilon, double delta, const std::string& where) {
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    throw InputError(where + ": DP epsilon must be a positive number, got " + std::to_string(epsilon));
  if (!(delta > 0 && delta < 1))
    throw InputError(where + ": DP delta must lie in (0, 1), got " + std::to_string(delta));
}

double zcdp_rho_for(double epsilon, double delta) {
  const double l = std::log(1.0 / delta);
  const double root = std::sqrt(l + epsilon) - std::sqrt(l);
  return root * root;
}

double zcdp_epsilon(double rho, double delta) {
  if (!std::isfinite(rho)) return kNotPrivate;
  if (rho <= 0) return 0;
  return rho + 2.0 * std::sqrt(rho * std::log(1.0 / delta));
}

double gaussian_rho(double sensitivity, double sigma) {
  if (!(sigma > 0)) return kNotPrivate;
  return sensitivity * sensitivity / (2.0 * sigma * sigma);
}

PrivacyRelease zcdp_release(std::string what, double rho, double delta) {
  PrivacyRelease r;
  r.what = std::move(what);
  r.mechanism = "gaussian (zCDP)";
  r.rho = rho;
  r.delta = delta;
  r.epsilon = zcdp_epsilon(rho, delta);
  return r;
}

PrivacyTotal compose(const std::vector<PrivacyRelease>& releases, int num_classes) {
  PrivacyTotal worst;
  const auto covers = [](const PrivacyRelease& r, int c) {
    return r.classes.empty() || std::find(r.classes.begin(), r.classes.end(), c) != r.classes.end();
  };
  for (int c = 0; c < std::max(num_classes, 1); ++c) {
    double rho = 0, rho_delta = 0, eps = 0, delta = 0;
    for (const PrivacyRelease& r : releases) {
      if (r.mechanism == "withheld" || !covers(r, c)) continue;
      if (r.rho > 0) {
        rho += r.rho;
        rho_delta = std::max(rho_delta, r.delta);
      } else {
        eps += r.epsilon;
        delta += r.delta;
      }
    }
    PrivacyTotal t;
    t.rho = rho;
    t.epsilon = eps + (rho > 0 ? zcdp_epsilon(rho, rho_delta) : 0.0);
    t.delta = delta + (rho > 0 ? rho_delta : 0.0);
    if (t.epsilon > worst.epsilon || (t.epsilon == worst.epsilon && t.delta > worst.delta)) worst = t;
  }
  return worst;
}

}  // namespace fednode
