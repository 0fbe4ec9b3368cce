// A networked node's result as it runs (NodeResult, node/node.h): the traffic its outbox and inbox
// counted and, while the plan runs, what its machine has to show, synced at every step; scored by
// the status rules (node/node_result.h), with the personal head where the run personalises, when
// the node finishes.
#pragma once

#include "core/log.h"
#include "node/inbox.h"
#include "node/machine.h"
#include "node/node.h"
#include "node/outbox.h"
#include "node/state_store.h"

#include <map>
#include <optional>

namespace fednode {

class ResultBook {
 public:
  ResultBook(NodeId id, int64_t samples, Contributors expected_contributors);

  NodeResult& result() { return result_; }
  const NodeResult& result() const { return result_; }
  // What the outbox sent in one pump.
  void count_sent(const SendTally& pumped);
  // The counters; and unless the node finished (scored already), the machine's outcome.
  void sync(const InboxTally& in, const Machine& machine, bool finished);
  // Status, head and accuracy as the node finishes with `status`; again if the head changes after.
  void score(const Machine& machine, NodeStatus status, const std::optional<Features>& test);
  void score_again(const Machine& machine, const std::optional<Features>& test) { score(machine, finished_as_, test); }
  // Personalised runs: the personal head, once the node's head is final, saved in `store` and
  // scored on `test` beside the head, in the node's own class proportions too. A node that cannot
  // train one (no class means came) says why and keeps its federation head as its result.
  void personalize(const Machine& machine, const Features& local, const std::optional<Features>& test,
                   StateStore& store, const Say& say);

 private:
  NodeResult result_;
  SendTally sent_;                     // over the whole run
  NodeStatus finished_as_ = NodeStatus::Running;
};

}  // namespace fednode
