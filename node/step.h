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

StepOutput run_step(const Method& method, const KnowledgeList& received, const Features& local,
                    const NodeContext& ctx, bool forwards, bool fits_head);

// Bytes a head occupies in its saved form (what a hub sends back to each leaf).
int64_t head_bytes(const Head& head);

}  // namespace fednode
