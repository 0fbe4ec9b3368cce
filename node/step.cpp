#include "node/step.h"

#include <chrono>
#include <sstream>

namespace fednode {
namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

StepOutput run_step(const Method& method, const KnowledgeList& received, const Features& local,
                    const NodeContext& ctx, bool forwards, bool fits_head) {
  StepOutput out;
  if (forwards) {
    const auto t0 = std::chrono::steady_clock::now();
    out.outgoing = received.empty() ? method.summarize(local, ctx) : method.merge(received, &local, ctx);
    out.merge_seconds = seconds_since(t0);
  }
  if (fits_head) {
    const auto t0 = std::chrono::steady_clock::now();
    out.head = method.fit_head(received, &local, ctx);
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
