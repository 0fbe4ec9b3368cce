// What one node does once the inputs its topology waits for have arrived: merge them with its
// own data into the knowledge it forwards, and fit its own head. The in-process simulator and the
// networked node both call this, so they run exactly the same method code.
#pragma once

#include "methods/method.h"

#include <memory>
#include <optional>
#include <vector>

namespace fednode {

struct StepOutput {
  std::optional<Knowledge> outgoing;  // set when the node forwards
  std::unique_ptr<Head> head;         // set when the node fits a head
  double merge_seconds = 0;
  double head_seconds = 0;
};

// What leaves the node is computed only from what it may release (docs/privacy.md): its local
// data less the classes the release policy withholds (ctx.min_class_count), through the method's
// DP when that is on. So the knowledge it forwards merges the released data, and a head it sends
// (ctx.head_is_sent: a star's hub) is fitted on the released data too, on the node's own
// DP summary when the method releases one. A head the node keeps uses all its data exactly.
StepOutput run_step(const Method& method, const KnowledgeList& received, const Features& local,
                    const NodeContext& ctx, bool forwards, bool fits_head);

// The node's own summary as it is released: method.summarize on the released data.
Knowledge released_summary(const Method& method, const Features& local, const NodeContext& ctx);

// Whether every release `method` makes of `local` is differentially private.
bool releases_privately(const Method& method, const Features& local, const NodeContext& ctx);

// Bytes a head occupies in its saved form (what a hub sends back to each leaf).
int64_t head_bytes(const Head& head);

}  // namespace fednode
