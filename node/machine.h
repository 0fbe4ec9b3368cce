// A node's behaviour as a state machine (docs/architecture.md, "The node machine"): events in —
// a message accepted, time passing, a peer refusing what this node sent, a restart with what the
// state directory holds — and actions out, in the order they must be carried out: send this to
// that node, the head changed (save it, tell the application), a phase is done (mark it).
//
// The machine does the node's computation itself (merging, fitting, refitting: node/phases.h),
// and nothing else: no sockets, files or clocks. The networked fednode::Node drives it from its
// transport, inbox and outbox; `fednode simulate` drives one machine per node and hands every
// Send to its recipient in memory. Both therefore wait, merge and forward by the same rules.
//
// Wire-free: it speaks in its own events and actions. What a message is, whether the node takes
// it, and which capability it is for is the node's admission (node/admission.h).
//
// Time is the driver's: every event that may start or end a wait carries `now`, in seconds on
// any clock that does not go back. The simulator passes 0, so no deadline ever passes there.
#pragma once

#include "core/log.h"
#include "methods/method.h"
#include "node/hub_head.h"
#include "node/machine_action.h"
#include "node/machine_event.h"
#include "node/merge_gate.h"
#include "node/personalization.h"
#include "node/phases.h"
#include "node/running_sum.h"
#include "topology/plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fednode {

struct Topology;

// What the node has to show for its plan so far.
struct MachineOutcome {
  std::shared_ptr<const Head> head;
  Contributors contributors;           // whose data the head was trained on
  Contributors expected_contributors;  // the plan's, when nobody misses a deadline
  std::vector<NodeId> missing;         // senders given up on at a deadline (some may deliver later)
  std::vector<NodeId> discarded_from;  // senders whose piece made merging fail
  double seconds_waiting = 0, seconds_merge = 0, seconds_head = 0;
};

struct MachineConfig {
  const Topology* topology = nullptr;  // validated; outlives the machine
  NodePlan plan;
  const Method* method = nullptr;      // outlives the machine
  const Features* local = nullptr;     // this node's training features; outlives the machine
  NodeContext ctx;                     // node, seed, fingerprint, classes, dim, stop, progress
  bool half_precision = false;         // knowledge travels in float16 (counted_bytes)
  Say say;  // human-readable lines, with their level; may be empty
  std::function<void(NodeId from, const Knowledge&)> on_knowledge;  // a fresh piece accepted; may be empty
  // A capability that holds phase 1 back until it has done its part (secure aggregation's
  // unmasking round, node/member.h makes it); null: none.
  std::shared_ptr<MergeGate> gate;
  // Personalisation (node/personalization.h): decorates the head sent with its class means, and
  // trains the personal head; null where the method does not personalise.
  std::shared_ptr<const Personalization> personalization;
};


class Machine {
 public:
  explicit Machine(MachineConfig config);
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // --- events ---------------------------------------------------------------------------------

  // Knowledge or Complete knowledge (`kind`) the plan takes from `from` (node/admission.h said so).
  // `fresh`: it just arrived (not replayed from the state directory on a restart). `seq` orders
  // one sender's messages. Shared, not copied: for DP-FedPFT's full covariances a gigabyte a leaf.
  Actions accept_knowledge(NodeId from, uint64_t seq, PlanMessage kind, std::shared_ptr<const Knowledge> knowledge,
                           bool fresh);
  // The hub's head, to a star leaf; `now` times its arrival (a leaf may wait for a refit).
  Actions accept_head(NodeId from, HeadOffer head, bool fresh, double now);
  // A peer refused something this node sent (an error reply, now or before a restart).
  void peer_refused(NodeId peer);
  // The node starts: the phases its state directory marks done and the head it holds (none of
  // either on a first start), after every stored message went through accept(fresh = false).
  // Waits are counted from `now`.
  void restart(bool phase1_done, bool phase2_done, std::shared_ptr<const Head> head,
               const Contributors& head_contributors, double now);
  // Time passed: give up on senders past their deadline, then do whatever is due.
  Actions tick(double now);
  // Data was arriving at `when` (a transfer moving towards this node): a stage's deadline counts
  // from the later of the stage's start and the last such moment, so that a sender whose
  // message is still on its way over a slow link is not given up on; silence is. The network
  // node reports it (Transport::last_inbound_progress); the simulator never does.
  void inbound_progress(double when) { last_inbound_ = std::max(last_inbound_, when); }

  // --- state --------------------------------------------------------------------------------

  // The plan is done: phase 2's inputs in (or given up on) and acted on.
  bool plan_done() const { return progress_.finished(); }
  // Knowledge came after the plan was done (or phase 1): the next tick refits the head with it.
  bool refit_due() const { return refit_pending_; }
  // A head taken or refitted after the plan was done, since the driver last asked: the result
  // the driver reported may be out of date.
  bool take_late_change() { return std::exchange(late_change_, false); }
  // Senders given up on at a deadline that never delivered.
  std::vector<NodeId> never_delivered() const { return progress_.missing(); }
  // Whether the plan still waits for Knowledge or Complete from `from` (the inbox paces such
  // senders by when it acknowledges their hello).
  bool awaits_knowledge_from(NodeId from) const;
  const MachineOutcome& outcome() const { return outcome_; }
  // Where the node stands, for people watching (fednode status): the stage, the senders it still
  // waits for, and when (in the driver's time) the current stage's deadline passes, if it waits.
  struct Standing {
    const char* stage = "";  // "phase 1", "phase 2" or "plan done"
    std::vector<NodeId> awaiting;
    std::optional<double> deadline_at;
    std::vector<std::pair<NodeId, PlanMessage>> accepted;  // every message the plan took, in order
  };
  Standing standing() const;
  const NodePlan& plan() const { return config_.plan; }
  const MachineConfig& config() const { return config_; }
  // Whether `kind` knowledge from `from` on these contributors is held already (a sender that
  // redid a phase after a crash sealed it anew: acknowledged, not stored or used again).
  bool holds_knowledge(NodeId from, PlanMessage kind, const Contributors& contributors) const;
  // Whether a head held from the hub covers at least these contributors (a head covering more is
  // the hub's refit on knowledge that came late).
  bool holds_head_covering(const Contributors& contributors) const;
  // Knowledge pieces folded into a running sum as they arrived (see foldable_senders_).
  size_t folded_count() const { return folded_.count(); }
  // A driver that will deliver nothing more (the simulator, once the machine is done) frees
  // the pieces it holds.
  void release_inputs();
  // Personalisation (MachineConfig::personalization): the node's personal head, trained on its own
  // data from its current head, aligned to the class means of what that head was trained on (a
  // star leaf: the means its hub sent with the head). Null when the run does not personalise, or
  // the node has no head or no data. Asked once the plan is done; throws InputError where none
  // can be trained (a local class no one else holds a mean of cannot be).
  std::shared_ptr<const Head> personal_head() const;

 private:
  // A piece of knowledge as it arrived.
  struct Piece : ReceivedPiece {
    bool late = false;  // arrived after phase 1 was done: merged into the head only
  };
  // The Knowledge pieces of `held` in input order, with the folded sum.
  template <class P>
  KnowledgeList knowledge_held(const std::vector<P>& held) const;

  // Phase 1: merges the wait_for senders' knowledge with the local data, fits the head, and sends
  // the merged knowledge on (knowledge, feedback, the ring's complete; the hub's head).
  void phase1(Actions& out, double now);
  // Phase 2: takes the hub's head (or fits one on local data when none came), refits on the ring's
  // complete knowledge and passes it on, and merges graph feedback.
  void phase2(Actions& out);
  // The ring's second pass: a head on the complete knowledge (with what this node holds, when the
  // complete knowledge is partial), then the complete knowledge on to complete_to.
  void take_complete(Actions& out);
  // Knowledge that came after phase 1 (feedback, or past the deadline): merged for the head only.
  void refit(Actions& out);
  // The hub's head, after this node gave up on it and fitted one on its own data.
  void adopt_late_head(NodeId from, Actions& out);
  // A star leaf whose hub's head leaves out the leaf's own data waits for the hub's refit.
  bool waiting_for_refit(double now);
  // The gate (MachineConfig::gate), asked once phase 1's inputs are in. True when phase 1 may
  // go on: with what the gate gave the method, or without what it says cannot be read (discarded
  // here).
  bool gate_open(Actions& out, double now);
  // The deadline of the current stage passed: name those given up on.
  void give_up_on_missing(double deadline);
  // Sends the hub's head to every leaf, in phase 1 or as an offer after a refit.
  void send_head(const std::shared_ptr<const Head>& head, const Contributors& contributors, int phase,
                 Actions& out);
  void send_knowledge(NodeId to, std::shared_ptr<const Knowledge> k, PlanMessage kind, int phase, Actions& out) const;
  void set_head(std::shared_ptr<const Head> head, const Contributors& contributors, Actions& out);
  // run_admitting (node/phases.h) over the pieces held, discarding any that makes `work` fail.
  template <class Work>
  auto with_admission(const std::string& what, Work&& work);
  void discard(const ReceivedPiece& piece, const std::string& why);
  // Whose data a head on the Knowledge pieces held and the local data would cover.
  Contributors held_contributors() const;
  // The class means behind the node's current head (see personal_head); null when the run does
  // not personalise, or a star leaf's hub sent none.
  std::shared_ptr<const ClassMeans> head_means() const;
  // The ring's complete knowledge, if it came.
  const Piece* complete_piece() const;
  // What a head on `complete` is fitted on: it alone, or with the Knowledge pieces held when it
  // covers less than the head already does (a node upstream gave up on someone).
  std::vector<const Knowledge*> complete_inputs(const Piece& complete) const;
  bool held_knowledge_adds_to_head() const;
  std::string who(NodeId id) const;
  void say(const std::string& line) const;
  void warn(const std::string& line) const;

  MachineConfig config_;
  PlanProgress progress_;
  MachineOutcome outcome_;
  std::vector<Piece> pieces_;
  RunningSum folded_;  // pieces nobody will want apart, folded as they arrive
  HubHead hub_head_;   // a star leaf's
  bool refit_pending_ = false;
  bool late_change_ = false;
  double stage_started_ = 0;
  double last_inbound_ = 0;
  bool gate_passed_ = false;
};

}  // namespace fednode
