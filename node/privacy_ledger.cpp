#include "node/privacy_ledger.h"

#include "core/json_writer.h"
#include "methods/dp/min_count.h"
#include "node/phases.h"
#include "node/step.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fednode {
namespace {

std::vector<int> as_ints(const std::vector<NodeId>& ids) { return std::vector<int>(ids.begin(), ids.end()); }

}  // namespace

PrivacyLedger privacy_ledger(const Method& method, const NodePlan& plan, const Features& local, const NodeContext& ctx) {
  PrivacyLedger ledger;
  if (local.size() == 0) return ledger;  // nothing of its own to release
  ledger.releases = withheld_releases(local, ctx.min_class_count);
  const std::optional<Features> kept = withhold_small_classes(local, ctx.min_class_count);
  const Features& released = kept ? *kept : local;
  if (forwards_knowledge(plan)) {
    std::vector<NodeId> to = plan.forward_to;
    to.insert(to.end(), plan.feedback_to.begin(), plan.feedback_to.end());
    if (plan.complete_to && !plan.complete_from) to.push_back(*plan.complete_to);  // the ring's last node
    std::sort(to.begin(), to.end());
    to.erase(std::unique(to.begin(), to.end()), to.end());
    for (PrivacyRelease r : method.privacy(released, ctx)) {
      r.to = as_ints(to);
      ledger.releases.push_back(std::move(r));
    }
  }
  if (plan.fits_head && !plan.send_head_to.empty()) {
    PrivacyRelease head;
    head.what = "head";
    head.to = as_ints(plan.send_head_to);
    if (releases_privately(method, released, ctx) && !forwards_knowledge(plan)) {
      // The head is fitted on the node's own DP summary (node/step.h), which it releases that way.
      for (PrivacyRelease r : method.privacy(released, ctx)) {
        r.what = "head, fitted on " + r.what;
        r.to = head.to;
        ledger.releases.push_back(std::move(r));
      }
      head.what.clear();
    } else if (releases_privately(method, released, ctx)) {
      head.mechanism = "post-processing";
      head.note = "fitted on the node's own DP summary (released above) and what it received";
    } else {
      head.mechanism = "none";
      head.epsilon = kNotPrivate;
      head.note = "fitted on the node's data";
    }
    if (!head.what.empty()) ledger.releases.push_back(std::move(head));
  }
  ledger.total = compose(ledger.releases, local.num_classes);
  return ledger;
}

void write_privacy_ledger(JsonWriter& w, const PrivacyLedger& ledger) {
  const auto number_or_text = [&](double v) {
    if (std::isinf(v)) w.value("not private");
    else w.value(v);
  };
  w.key("privacy").begin_object();
  w.key("releases").begin_array();
  for (const PrivacyRelease& r : ledger.releases) {
    w.begin_object();
    w.key("what").value(r.what);
    w.key("mechanism").value(r.mechanism);
    if (!r.classes.empty()) w.key("classes").array(r.classes);
    if (r.mechanism != "withheld") {
      w.key("epsilon");
      number_or_text(r.epsilon);
      w.key("delta").value(r.delta);
      if (r.rho > 0) w.key("rho").value(r.rho);
    }
    if (!r.sensitivity.empty()) w.key("sensitivity").array(r.sensitivity);
    if (!r.sigma.empty()) w.key("sigma").array(r.sigma);
    if (!r.to.empty()) w.key("to").array(r.to);
    if (!r.note.empty()) w.key("note").value(r.note);
    w.end_object();
  }
  w.end_array();
  w.key("epsilon");
  number_or_text(ledger.total.epsilon);
  w.key("delta").value(ledger.total.delta);
  if (ledger.total.rho > 0) w.key("rho").value(ledger.total.rho);
  w.end_object();
}

std::string ledger_summary(const PrivacyLedger& ledger) {
  const bool released = std::any_of(ledger.releases.begin(), ledger.releases.end(),
                                    [](const PrivacyRelease& r) { return r.mechanism != "withheld"; });
  if (!released) return "nothing released";
  if (std::isinf(ledger.total.epsilon)) return "not private";
  char text[64];
  std::snprintf(text, sizeof text, "eps %.3g (delta %.2g)", ledger.total.epsilon, ledger.total.delta);
  return text;
}

}  // namespace fednode
