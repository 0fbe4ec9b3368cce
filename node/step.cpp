#include "node/step.h"

#include "core/elapsed.h"
#include "methods/dp/min_count.h"

#include <algorithm>
#include <chrono>
#include <sstream>

namespace fednode {

bool releases_privately(const Method& method, const Features& local, const NodeContext& ctx) {
  const std::vector<PrivacyRelease> releases = method.privacy(local, ctx);
  return std::all_of(releases.begin(), releases.end(), [](const PrivacyRelease& r) { return r.epsilon < kNotPrivate; });
}

Knowledge released_summary(const Method& method, const Features& local, const NodeContext& ctx) {
  const std::optional<Features> kept = withhold_small_classes(local, ctx.min_class_count);
  return method.summarize(kept ? *kept : local, ctx);
}

StepOutput run_step(const Method& method, const KnowledgeList& received, const Features& local,
                    const NodeContext& ctx, bool forwards, bool fits_head) {
  StepOutput out;
  const std::optional<Features> kept = withhold_small_classes(local, ctx.min_class_count);
  const Features& released = kept ? *kept : local;
  if (forwards) {
    const auto t0 = std::chrono::steady_clock::now();
    out.outgoing = received.empty() ? method.summarize(released, ctx) : method.merge(received, &released, ctx);
    out.merge_seconds = seconds_since(t0);
  }
  if (fits_head) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!ctx.head_is_sent) {
      out.head = method.fit_head(received, &local, ctx);
    } else if (releases_privately(method, released, ctx)) {
      // The node's own data enters the head it sends only as its DP summary, like anyone else's.
      const Knowledge own = method.summarize(released, ctx);
      std::vector<const Knowledge*> pieces;
      for (const Knowledge& k : received) pieces.push_back(&k);
      pieces.push_back(&own);
      const KnowledgeList with_own(std::move(pieces), received.folded());
      out.head = method.fit_head(with_own, nullptr, ctx);
    } else {
      out.head = method.fit_head(received, &released, ctx);
    }
    out.head_seconds = seconds_since(t0);
  }
  return out;
}

int64_t head_bytes(const Head& head) {
  std::ostringstream s;
  head.save(s);
  return static_cast<int64_t>(s.str().size());
}

}  // namespace fednode
