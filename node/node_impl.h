// fednode::Node's private state and steps (node/node.h is the public face): a node composes its
// transport (ZeroMQ), its inbox (open, check, store, acknowledge), its outbox (store, send, resend
// until acknowledged), its state store, and the member of the federation that decides what it does
// (node/member.h: the machine with its capabilities, and the admission in front of it). Here is
// only the driving: frames to the inbox, the machine's actions to the store and the outbox, time to
// the machine, and when the node is done, the closing that keeps it answering for a moment.
// node/node_start.cpp sets a node up and takes back its state directory; node/node.cpp drives it.
// Not installed: an application sees node/node.h only.
#pragma once

#include "core/elapsed.h"
#include "node/closing.h"
#include "node/discovery.h"
#include "node/inbox.h"
#include "node/member.h"
#include "node/node.h"
#include "node/node_status.h"
#include "node/outbox.h"
#include "node/result_book.h"
#include "node/secure_channel.h"
#include "node/standing_files.h"
#include "node/state_store.h"
#include "node/transport.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>

namespace fednode {

struct Node::Impl {
  using Clock = std::chrono::steady_clock;

  NodeConfig config;
  NodePlan plan;
  // Hop encryption (CurveZMQ) keys, taken from the identity before `channel` below takes it over:
  // keep this member declared before `channel`.
  std::shared_ptr<const CurveKeyPair> curve_keys;
  SecretKey32 noise_key;  // DP noise (crypto/noise_key.h): also taken before `channel`
  // Secure aggregation (node/member.h): the group and the pair seeds, also taken from the
  // identity before `channel`.
  MemberMasks masks;
  SecureChannel channel;
  std::unique_ptr<Method> method;
  RunningMember member;
  Machine* machine = nullptr;  // member's
  std::unique_ptr<Transport> transport;
  std::unique_ptr<StateStore> store;
  std::unique_ptr<Outbox> outbox;
  std::unique_ptr<Inbox> inbox;
  std::unique_ptr<Closing> closing;      // once finished: how long to keep answering
  std::unique_ptr<Discovery> discovery;  // NodeConfig::discover
  EncodeOptions encode;

  Clock::time_point started = Clock::now(), done_at{}, inbound_sampled{};
  mutable std::string last_line;  // what the node said last, for status.json
  std::unique_ptr<StandingFiles> files;
  bool done = false;
  ResultBook book;
  NodeResult& result;  // book's
  // An exception from the application's callback must not leave the node half-way through what
  // it was doing (a message stored but neither counted nor acknowledged, a head saved but not
  // sent): the first one is kept, and Node::step rethrows it once the step's work is done.
  mutable std::exception_ptr callback_error;

  // Takes the keys it needs from `identity`, which the channel then holds; starts nothing.
  Impl(NodeConfig c, Identity identity);

  double now() const { return seconds_since(started); }
  double ack_deadline() const {
    return config.ack_deadline_seconds.value_or(config.topology.federation.ack_deadline_seconds);
  }
  std::string who(NodeId id) const { return config.topology.describe(id); }
  void say(const std::string& msg) const { log(LogLevel::Info, msg); }
  void warn(const std::string& msg) const { log(LogLevel::Warning, msg); }
  // To the application's callbacks, at the configured level; status.json follows every line.
  void log(LogLevel level, const std::string& msg) const;
  // Where the node's parts say their lines: through log(), so the level filter applies to all.
  Say sink() const {
    return Say([this](LogLevel level, const std::string& line) { log(level, line); });
  }
  template <class Call>
  void call_back(Call&& call) const {
    try {
      call();
    } catch (...) {
      if (!callback_error) callback_error = std::current_exception();
    }
  }
  void rethrow_callback_error() {
    if (callback_error) std::rethrow_exception(std::exchange(callback_error, nullptr));
  }

  // --- start-up (node/node_start.cpp) ---------------------------------------------------------
  // Everything in order: the member, the transport (bound before the state directory is
  // touched, so that a second copy of a running node fails there), the store, the outbox and
  // inbox, what the state directory holds, the peers, and the hellos.
  void start(const std::atomic<bool>* stop);
  // The member of the federation (node/member.h), with the node's callbacks and stop flag.
  void start_member_of(const std::atomic<bool>* stop);
  // Hop encryption (docs/security.md, "Layer 2"): the topology decides, for every node alike.
  void open_transport();
  // The outbox stores payloads and seals them at each handover: as a version-2 stream for a
  // peer that opens them (Inbox::stream_cipher) when large, else as one frame.
  void open_outbox();
  // The peers' addresses to the transport; those without one are sought by discovery.
  void add_peers();
  // A restart: take back everything the state directory holds, in the order it happened.
  void restore();

  // --- the machine's actions ------------------------------------------------------------------
  // The machine's actions, in order: sends to the outbox, heads to the store and the application,
  // phases marked done, lines said.
  void apply(Actions actions);
  // Sealed with the next message id and stored before it is sent; counted as sent once queued,
  // since the outbox keeps trying.
  void queue(NodeId to, MessageType type, int phase, const Payload& payload, int64_t counted_bytes);
  // Knowledge is encoded without copying it into a Payload (tens of megabytes for FedPFT).
  void queue_knowledge(const Action& a);

  // --- the loop ---------------------------------------------------------------------------------
  // One frame, if one comes within `wait`, through the inbox to the machine.
  void receive(std::chrono::milliseconds wait);
  // Everything but receiving: discovery, the machine's tick, pacing, receipts, the outbox's pump;
  // once the plan is done, finishing when the sends are settled or the ack deadline passed.
  void advance();
  // Tells the machine when data last arrived, for its deadlines; sampled twice a second at most
  // (a hub's every connection costs three system calls), and not at all once the plan is done.
  void note_inbound_progress();
  // The ack deadline counts from the end of the plan or from the last moment a frame still
  // unacknowledged moved towards its peer, whichever is later: a slow link that carries the
  // frame is waited for (docs/node.md, "Reliability"), silence is not.
  Clock::time_point ack_wait_started();
  // Merging and fitting stop early when asked to (NodeContext::stop); the phase is then redone
  // from the stored inputs by the next run of the same command.
  bool advance_unless_stopped();
  // True once a finished node may close (node/closing.h), unless knowledge that came meanwhile
  // sends it back to its plan.
  bool closed(std::chrono::milliseconds budget);
  // Node::step: true once the node is done and may close.
  bool step(std::chrono::milliseconds budget, const std::atomic<bool>& stop);
  // status.json and the metrics, about once a second while the node runs (node/standing_files.h),
  // from the steps and from what the node says.
  void write_status() const;
  NodeStanding standing() const;
  // A burst of waiting frames, the plan, then frames until `budget` or the next resend is due.
  bool step_once(std::chrono::milliseconds budget, const std::atomic<bool>& stop);

  // --- the result -----------------------------------------------------------------------------
  // The counters, and while the node runs, what its plan has to show so far.
  void sync_result() { book.sync(inbox->tally(), *machine, done); }
  // The plan is done (or the node stops): scored, personalised, result.json written; the node
  // then keeps answering while it closes.
  void finish(NodeStatus status);
};

}  // namespace fednode
