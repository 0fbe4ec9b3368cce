// What one node does in a one-shot run, read off its topology (docs/topologies.md, "Semantics"):
// whom it waits for, whom it forwards to, whether it fits a head, what comes back, and when it
// is finished. The node runtime follows a NodePlan; PlanProgress does its bookkeeping.
#pragma once

#include "topology/topology.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

// What travels on a link, as far as routing is concerned.
enum class PlanMessage {
  Knowledge,  // a node's merged knowledge (or, when it relays, each piece it holds)
  Complete,   // ring, second pass: the complete knowledge
  Head,       // star: the hub's trained head
};
const char* to_string(PlanMessage m);

// A run has two phases. Phase 1: wait for `wait_for`, merge with the local data, fit the head
// (if `fits_head`), then send Knowledge to `forward_to` and `feedback_to`, Head to `send_head_to`,
// and, at the ring's last node, Complete to `complete_to`. Phase 2: wait for what comes back
// (`head_from`, `complete_from`, `late_from`), refit or take the head, pass Complete on to
// `complete_to`. The node is finished when phase 2's inputs are in (or their deadline passed)
// and its sends are acknowledged. Lists are in ascending id order.
struct NodePlan {
  NodeId id = 0;
  TopologyMode mode = TopologyMode::Linear;

  // Phase 1.
  std::vector<NodeId> wait_for;      // in-neighbours whose Knowledge it merges
  std::vector<NodeId> forward_to;    // out-neighbours that get its Knowledge
  std::vector<NodeId> feedback_to;   // graph: feedback out-neighbours; they get the same Knowledge
  // false: forward every piece received, unchanged, plus the node's own summary, instead of
  // one merged piece (graph mode, where merged pieces would overlap partially further down and
  // the contributor rules would then have to leave one out).
  bool forward_merged = true;
  bool fits_head = true;             // star leaves do not: the hub's head comes back to them
  std::vector<NodeId> send_head_to;  // star hub: every leaf

  // Phase 2.
  std::optional<NodeId> head_from;      // star leaf: the hub
  std::optional<NodeId> complete_from;  // ring: who hands it the complete knowledge
  std::optional<NodeId> complete_to;    // ring: to whom it passes the complete knowledge on
  std::vector<NodeId> late_from;        // graph: feedback in-neighbours, merged after phase 1

  // Whose data its final head covers when no one misses a deadline.
  Contributors expected_contributors;
  // Per node it receives Knowledge from (wait_for, late_from): whose data that Knowledge can
  // hold at most. A piece claiming anyone else is refused: it would pass for other senders'
  // knowledge and push their genuine pieces out as redundant. Complete knowledge may hold anyone.
  std::map<NodeId, Contributors> sources;
  double deadline_seconds = kDefaultDeadlineSeconds;
  // How long phase 2 waits: what comes back depends on other nodes' waits, each of which may
  // last up to deadline_seconds (a star's hub waits for its slowest leaf before it fits the
  // head), so the wait is one deadline more than the waits upstream of it. Zero without phase 2.
  double return_deadline_seconds = 0;

  bool has_phase2() const { return head_from || complete_from || !late_from.empty(); }
  // Whether it may accept `kind` from `from`; anything else is rejected by the runtime.
  bool expects(NodeId from, PlanMessage kind) const;
  // Every node it receives from or sends to, ascending: the only peers it talks to.
  std::vector<NodeId> peers() const;
  // Every node it sends to, in any phase, ascending (each gets its hello first).
  std::vector<NodeId> recipients() const;
};

// What changes the plans beyond the topology itself.
struct PlanOptions {
  // Secure aggregation (docs/privacy.md, "Secure aggregation"). On a chain or ring the first pass
  // carries masked sums that nobody but its last node can read, so only that node fits a head in
  // phase 1, and a chain gains the ring's second pass, which brings every node the head on the
  // total. On a star the hub runs an unmasking round before it fits its head: its leaves wait two
  // deadlines more for the head (the round's two steps). On a graph, one sink collects every piece (the others forward to
  // it): it alone fits a head in phase 1, on the total, which then travels to every other node in
  // topological order as complete knowledge; feedback edges are refused (InputError).
  bool secure_aggregation = false;
};

// The topology must have passed validate_topology (the loaders do that). Throws InputError for
// an unknown id.
NodePlan plan_for(const Topology& topology, NodeId id, const PlanOptions& options = {});
NodePlan plan_for(const Topology& topology, const std::string& id_or_name);
// Every node's plan, in ascending id order (one analysis for all).
std::vector<NodePlan> plan_all(const Topology& topology, const PlanOptions& options = {});

// One line for people, e.g. "node 2 (right): waits for 0; relays to 3; fits its head;
// finished after phase 1" (for `fednode topology` checks and launch progress).
std::string describe_plan(const Topology& topology, const NodePlan& plan);

// A node's progress through its plan: pure bookkeeping, no clocks or sockets. The runtime
// reports what arrived and what it did, and decides when a deadline has passed.
class PlanProgress {
 public:
  enum class Stage { Gather, Return, Done };

  explicit PlanProgress(NodePlan plan);
  const NodePlan& plan() const { return plan_; }
  Stage stage() const { return stage_; }

  // A message arrived. False (and nothing changes) when the plan expects no such message from
  // `from`; a repeat returns true and changes nothing. Phase 2 messages may arrive early, and
  // phase 1 Knowledge after its deadline: both are kept (the runtime merges late arrivals and
  // refits the head).
  bool received(NodeId from, PlanMessage kind);
  bool has(NodeId from, PlanMessage kind) const;

  // Phase 1's inputs are all in or given up on: merge, fit, forward, then call merged().
  bool ready_to_merge() const;
  void merged();
  // Phase 2's inputs are all in or given up on: refit or take the head, pass Complete on, then
  // call completed().
  bool ready_to_complete() const;
  void completed();
  bool finished() const { return stage_ == Stage::Done; }

  // The current stage's deadline passed: whoever has not delivered is given up on.
  void deadline_passed();
  // Senders the current stage still waits for; senders given up on that never delivered.
  std::vector<NodeId> awaiting() const;
  std::vector<NodeId> missing() const;
  // What arrived, in order (repeats once).
  const std::vector<std::pair<NodeId, PlanMessage>>& arrived() const { return arrived_; }

 private:
  std::vector<std::pair<NodeId, PlanMessage>> inputs(Stage s) const;
  bool all_in(Stage s) const;

  NodePlan plan_;
  Stage stage_ = Stage::Gather;
  std::vector<std::pair<NodeId, PlanMessage>> arrived_;
  std::vector<std::pair<NodeId, PlanMessage>> given_up_;
};

// 5, 0.001 or 2.5: a deadline as the topology gave it, not rounded to whole seconds.
std::string deadline_text(double seconds);

}  // namespace fednode
