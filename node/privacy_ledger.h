// A node's privacy ledger (docs/privacy.md, "The ledger"): every release of its own data that
// its plan makes (the knowledge it forwards, a head it sends), the classes its release policy
// withheld, who received each directly, and the node's total. Written into result.json and the
// simulate report as "privacy". A release is counted once however many messages carry it: a
// resend, a restart's second send and the ring's second pass carry the same values (the noise
// is drawn once per run, core/secret_rng.h), and whatever a recipient forwards of it is
// post-processing.
#pragma once

#include "methods/dp/accounting.h"
#include "methods/method.h"
#include "topology/plan.h"

#include <string>
#include <vector>

namespace fednode {

class JsonWriter;

struct PrivacyLedger {
  std::vector<PrivacyRelease> releases;
  PrivacyTotal total;
};

PrivacyLedger privacy_ledger(const Method& method, const NodePlan& plan, const Features& local, const NodeContext& ctx);

// "privacy": {"releases": [...], "epsilon": E or "not private", "delta": D, "rho": R}.
void write_privacy_ledger(JsonWriter& w, const PrivacyLedger& ledger);

// For tables: "eps 1.00 (delta 1e-05)", "not private", or "nothing released".
std::string ledger_summary(const PrivacyLedger& ledger);

}  // namespace fednode
