#include "node/node.h"

#include "crypto/secure_channel.h"
#include "node/configuration_record.h"
#include "node/elapsed.h"
#include "node/json.h"
#include "node/outbox.h"
#include "node/phases.h"
#include "node/printable.h"
#include "node/state_store.h"
#include "node/step.h"
#include "topology/plan.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

namespace fednode {
namespace {

using Clock = std::chrono::steady_clock;

// Frames handled before the node looks at its plan again (Node::step).
constexpr int kFramesPerStep = 256;



// 5, 0.001 or 2.5: a deadline as the topology gave it, not rounded to whole seconds.
std::string seconds_text(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

std::optional<PlanMessage> routing_kind(MessageType t) {
  switch (t) {
    case MessageType::Knowledge: return PlanMessage::Knowledge;
    case MessageType::Complete: return PlanMessage::Complete;
    case MessageType::Head: return PlanMessage::Head;
    default: return std::nullopt;
  }
}

// Adds `id` unless it is there already; true if it was added.
bool add_once(std::vector<NodeId>& ids, NodeId id) {
  if (std::find(ids.begin(), ids.end(), id) != ids.end()) return false;
  ids.push_back(id);
  return true;
}

// A piece of knowledge that arrived (seq = its message id).
struct Piece : ReceivedPiece {
  bool late = false;  // arrived after phase 1 was done: merged into the head only
};

}  // namespace

const char* to_string(NodeStatus s) {
  switch (s) {
    case NodeStatus::Running: return "running";
    case NodeStatus::Finished: return "finished";
    case NodeStatus::Incomplete: return "incomplete";
    case NodeStatus::Stopped: return "stopped";
  }
  return "?";
}

struct Node::Impl {
  NodeConfig config;
  NodePlan plan;
  PlanProgress progress;
  // Hop encryption (CurveZMQ) keys, taken from the identity before `channel` below takes it over:
  // keep this member declared before `channel`.
  std::shared_ptr<const CurveKeyPair> curve_keys;
  SecureChannel channel;
  std::unique_ptr<StateStore> store;
  std::unique_ptr<Transport> transport;
  ReplayGuard replay;
  std::unique_ptr<Method> method;
  NodeContext ctx;
  EncodeOptions encode;
  bool half_transfer = false;

  std::vector<Piece> pieces;
  std::optional<HeadMessage> hub_head;
  Clock::time_point hub_head_arrived{};
  bool said_waiting_for_refit = false;
  std::unique_ptr<Outbox> outbox;
  std::shared_ptr<const Head> head;
  std::optional<Knowledge> phase1_outgoing;  // what phase 1 merged (the ring's last node's complete)
  bool refit_pending = false;

  Clock::time_point started = Clock::now(), stage_started = Clock::now(), done_at{};
  bool done = false;
  NodeStatus finish_status = NodeStatus::Running;  // what finish() was called with
  // After finishing, the node keeps answering for a moment: its last acknowledgement may be
  // lost when it closes its connection (ZeroMQ drops what the peer has not read yet from a
  // connection that goes away), and the peer's resend must then find it still there.
  Clock::time_point closing_since{}, last_frame{};
  NodeResult result;

  Impl(NodeConfig c, Identity identity)
      : config(std::move(c)),
        plan(plan_for(config.topology, config.id)),
        progress(plan),
        curve_keys(config.topology.federation.hop_encryption == HopEncryption::Curve
                       ? std::make_shared<const CurveKeyPair>(identity)
                       : nullptr),
        channel(std::move(identity), config.id, derive_run_id(config.run_name), peer_keys(), config.limits) {}

  PeerKeys peer_keys() const {
    PeerKeys keys;
    for (const auto& n : config.topology.nodes) {
      if (!n.public_key) throw InputError(config.topology.describe(n.id) + " has no public key");
      PublicKey key;
      key.bytes = *n.public_key;
      keys[n.id] = key;
    }
    return keys;
  }

  void say(const std::string& msg) const {
    if (config.callbacks.progress) call_back([&] { config.callbacks.progress(msg); });
  }

  // An exception from the application's callback must not leave the node half-way through what
  // it was doing (a message stored but neither counted nor acknowledged, a head saved but not
  // sent): the first one is kept, and Node::step rethrows it once the step's work is done.
  mutable std::exception_ptr callback_error;
  template <class Call>
  void call_back(Call&& call) const {
    try {
      call();
    } catch (...) {
      if (!callback_error) callback_error = std::current_exception();
    }
  }
  void rethrow_callback_error() {
    if (!callback_error) return;
    std::rethrow_exception(std::exchange(callback_error, nullptr));
  }

  // Lines about rejected frames: a flood of them must not flood the log as well. At most
  // kRejectionLines per kRejectionWindow, then one line saying how many were left out.
  static constexpr int kRejectionLines = 20;
  static constexpr double kRejectionWindow = 10.0;
  Clock::time_point rejection_window{};
  int rejections_said = 0;
  int64_t rejections_unsaid = 0;

  void say_rejection(const std::string& msg) {
    if (seconds_since(rejection_window) >= kRejectionWindow) {
      say_rejections_left_out();
      rejection_window = Clock::now();
      rejections_said = 0;
    }
    if (rejections_said < kRejectionLines) {
      ++rejections_said;
      say(msg);
    } else {
      ++rejections_unsaid;
    }
  }
  void say_rejections_left_out() {
    if (rejections_unsaid == 0) return;
    say("... and " + std::to_string(rejections_unsaid) + " more rejected frames, not logged one by one");
    rejections_unsaid = 0;
  }
  std::string who(NodeId id) const { return config.topology.describe(id); }

  // --- start-up -----------------------------------------------------------------------------

  void start() {
    const auto& topo = config.topology;
    if (config.run_name.empty()) throw InputError("the node needs a run name (its run id derives from it)");
    validate_topology(topo);  // load_topology did, but an application may build one in memory
    if (config.method.method != topo.federation.method)
      throw InputError("the node runs " + config.method.method + " but " + topo.source + " says " +
                       topo.federation.method);
    check_timing();
    const std::string self = "node " + std::to_string(config.id);
    config.local.validate(self + "'s training features");
    if (config.local.size() == 0 && plan.wait_for.empty() && plan.late_from.empty())
      throw InputError(self + " has no training features and receives no knowledge in " + topo.source +
                       ": it would have nothing to send or to fit a head on");
    if (config.test) {
      config.test->validate(self + "'s test features");
      // Found out here rather than when the finished head is scored.
      if (config.test->dim() != config.local.dim() || config.test->num_classes != config.local.num_classes)
        throw InputError(self + "'s test features have " + std::to_string(config.test->dim()) + " dimensions and " +
                         std::to_string(config.test->num_classes) + " classes, its training features " +
                         std::to_string(config.local.dim()) + " and " + std::to_string(config.local.num_classes));
    }
    method = make_method(config.method);
    ctx.node = config.id;
    ctx.seed = topo.federation.seed;
    ctx.backbone_fingerprint = config.backbone_fingerprint;
    ctx.num_classes = config.local.num_classes;
    ctx.dim = static_cast<int>(config.local.dim());
    if (config.callbacks.progress) ctx.progress = [this](const std::string& line) { say(line); };
    half_transfer = config.method.method == "fedpft" && config.method.fedpft.half_precision;
    encode.precision = half_transfer ? Precision::Float16 : Precision::Float32;

    result.id = config.id;
    result.samples = config.local.size();
    result.expected_contributors = plan.expected_contributors;

    // Bound before the state directory is touched: a second copy of a running node fails here.
    const auto& me = topo.node(config.id);
    TransportOptions t = config.transport;
    t.max_message_bytes = config.limits.max_message_bytes;
    // --- hop encryption (docs/security.md, "Layer 2"): the topology decides, for every node alike.
    t.curve = CurveSettings{};
    if (curve_keys) {
      t.curve.keys = curve_keys;
      t.curve.peers = peer_keys();  // the whole topology: the ZAP allow list and the DEALERs' server keys
      say("hops: CurveZMQ, admitting the " + std::to_string(t.curve.peers.size()) + " keys of " + topo.source);
    }
    if (!t.log && config.callbacks.progress) t.log = [this](const std::string& line) { say(line); };
    // --- end of hop encryption
    transport = std::make_unique<Transport>(config.id, me.bind.empty() ? me.address : me.bind, t);

    const std::string dir = config.state_dir.empty() ? topo.state_dir_of(config.id) : config.state_dir;
    store = std::make_unique<StateStore>(dir, channel.run(), config.limits.max_message_bytes + 4096);
    outbox = std::make_unique<Outbox>(
        *store, *transport,
        OutboxTiming{config.retry_initial, config.retry_max, std::min(10.0, topo.federation.deadline_seconds)},
        [this](const std::string& line) { say(line); }, [this](NodeId id) { return who(id); });
    check_configuration();
    replay = store->load_replay();
    restore();

    for (NodeId peer : plan.peers()) {
      transport->add_peer(peer, topo.node(peer).address);
      const std::string problem = Transport::resolution_problem(topo.node(peer).address);
      if (!problem.empty())
        say("the address of " + who(peer) + " (" + topo.node(peer).address + "): " + problem +
            "; retrying in the background, but check the topology file or the name service");
    }

    if (!store->has_marker("hello")) {
      Hello h;
      h.node = config.id;
      h.method = config.method.method;
      h.backbone_fingerprint = config.backbone_fingerprint;
      h.dim = ctx.dim;
      h.num_classes = ctx.num_classes;
      h.software = "fednode 0.1.0";
      for (NodeId peer : senders_to()) queue(peer, MessageType::Hello, 0, Payload(h), 0);
      store->set_marker("hello");
    }
    say(describe_plan(topo, plan));
    stage_started = Clock::now();
  }

  void check_timing() const {
    const auto bad = [&](const std::string& what) {
      throw InputError("node " + std::to_string(config.id) + "'s " + what);
    };
    if (config.retry_initial.count() <= 0) bad("retry_initial must be positive");
    if (config.retry_max < config.retry_initial) bad("retry_max must be at least retry_initial");
    if (!(config.ack_deadline_seconds > 0 && config.ack_deadline_seconds <= kMaxDeadlineSeconds))
      bad("ack_deadline_seconds must lie in (0, " + std::to_string(static_cast<int64_t>(kMaxDeadlineSeconds)) + "]");
  }

  // A state directory continues the run it was started for, and only under the configuration it
  // was started with: other data or options would otherwise get the old result back.
  void check_configuration() {
    const std::string record = configuration_record(config);
    const auto stored = store->read_text("configuration", 1 << 20);
    const std::string remove = "; remove the directory to start the run over";
    if (!stored) {
      // Written at the first start, before anything else: a directory a node has started in
      // without one was not made by this version, or the record was removed.
      if (store->started_before())
        throw InputError("state directory '" + store->dir() + "' holds a run but no configuration record" + remove);
      store->write_text("configuration", sealed_configuration(record));
      return;
    }
    const auto was = unsealed_configuration(*stored);
    if (!was) throw InputError("state file '" + store->path("configuration") + "' is damaged (checksum)" + remove);
    const std::string difference = first_difference(*was, record);
    if (!difference.empty())
      throw InputError("state directory '" + store->dir() + "' holds a run of node " + std::to_string(config.id) +
                       " started with another configuration (" + difference +
                       "): give this configuration a state directory of its own, or remove that one to start over");
  }

  // Everyone this node sends to, in any phase.
  std::vector<NodeId> senders_to() const {
    std::set<NodeId> s(plan.forward_to.begin(), plan.forward_to.end());
    s.insert(plan.feedback_to.begin(), plan.feedback_to.end());
    s.insert(plan.send_head_to.begin(), plan.send_head_to.end());
    if (plan.complete_to) s.insert(*plan.complete_to);
    return {s.begin(), s.end()};
  }

  // A restart: take back everything the state directory holds, in the order it happened.
  void restore() {
    const auto outbox_entries = store->outbox();
    const auto inbox = store->received();
    result.restarts = store->count_start();
    if (result.restarts > 0) {
      say("continuing from the state directory " + store->dir() + " (" + std::to_string(inbox.size()) +
          " messages received, " + std::to_string(outbox_entries.size()) + " queued to send)");
    }
    const bool phase1 = store->has_marker("phase1");
    const bool phase2 = store->has_marker("phase2");
    if (!phase1) store->drop_outgoing(1);  // redone from the inputs, deterministically
    if (!phase2) store->drop_outgoing(2);
    const auto kept = store->outbox();
    // What the phases done before the restart queued, counted as the whole run's: a phase is
    // redone only after its frames were dropped, so nothing is counted twice.
    for (const auto& e : kept) result.knowledge_bytes_sent += e.counted_bytes;
    outbox->restore(kept);
    for (const auto& m : inbox) {
      EnvelopeHeader h;
      h.type = m.type;
      h.from = m.from;
      h.to = config.id;
      h.msg_id = m.msg_id;
      h.run = channel.run();
      // Checked again: what a node accepted under older checks or limits may not pass now.
      Payload payload;
      std::string refusal;
      try {
        payload = decode_payload(h, m.plaintext, config.limits);
        refusal = check(h, payload);
      } catch (const std::exception& e) {
        refusal = e.what();
      }
      if (!refusal.empty()) {
        say("not using the stored " + std::string(to_string(h.type)) + " " + std::to_string(h.msg_id) + " from " +
            who(h.from) + ": " + refusal);
        continue;
      }
      accept(h, std::move(payload), /*fresh=*/false);
    }
    if (phase1 || phase2) {
      head = store->load_head(&result.contributors);
      for (NodeId c : result.contributors)
        if (!config.topology.find(c))
          throw InputError("state directory '" + store->dir() + "': its head names contributor " + std::to_string(c) +
                           ", which is not in " + config.topology.source + "; remove the directory to start over");
    }
    if (phase1) progress_after_phase1();
    if (phase2 && progress.stage() == PlanProgress::Stage::Return) progress.completed();
    if (progress.finished() && head && held_knowledge_adds_to_head()) refit_pending = true;
  }

  void progress_after_phase1() {
    if (progress.stage() == PlanProgress::Stage::Gather) {
      if (!progress.ready_to_merge()) {
        // Phase 1 went on without these before the restart: they stay missing in the result.
        progress.deadline_passed();
        for (NodeId m : progress.missing()) add_once(result.missing, m);
      }
      progress.merged();
    }
  }

  // --- receiving ----------------------------------------------------------------------------

  // Opens the frame where it lies, so the frame's bytes are plaintext afterwards.
  void handle(Incoming& in) {
    last_frame = Clock::now();
    result.bytes_received += static_cast<int64_t>(in.frame.size());
    Message msg;
    std::string_view plaintext;
    try {
      msg = channel.open_in_place(in.frame.data(), in.frame.size(), replay, &plaintext);
    } catch (const RejectedMessage& e) {
      if (e.code == SecurityCode::Replayed && e.authenticated && e.header) {
        // A resend whose ack was lost (or a replay): it is stored already, so acknowledge it
        // again and use nothing from it.
        ++result.duplicates;
        if (routing_kind(e.header->type) || e.header->type == MessageType::Hello)
          send_ack(in, e.header->from, e.header->msg_id);
        return;
      }
      ++result.frames_rejected;
      say_rejection(std::string("rejected a frame") + (e.header ? " claiming to come from node " + std::to_string(e.header->from) : "") +
          ": " + e.what());
      if (e.authenticated && e.header && e.code == SecurityCode::MalformedPayload)
        send_error(in, e.header->from, ErrorReason::Malformed, e.header->msg_id, false, "payload refused");
      return;
    } catch (const std::exception& e) {
      ++result.frames_rejected;
      say_rejection(std::string("rejected a frame: ") + e.what());
      return;
    }
    const auto& h = msg.header;
    switch (h.type) {
      case MessageType::Ack:
        outbox->acknowledged(h.from, std::get<Ack>(msg.payload).acked_id);
        return;
      case MessageType::Error: {
        const auto& err = std::get<ErrorMessage>(msg.payload);
        say(who(h.from) + " reports " + to_string(err.reason) + (err.abort ? " and aborts" : "") + " about message " +
            std::to_string(err.ref_id) + ": " + printable(err.text));
        outbox->refused(h.from, err.ref_id);
        return;
      }
      default: break;
    }
    std::string refusal;
    try {
      refusal = check(h, msg.payload);
    } catch (const std::exception& e) {
      refusal = e.what();
    }
    if (!refusal.empty()) {
      ++result.frames_rejected;
      say_rejection("refused " + std::string(to_string(h.type)) + " " + std::to_string(h.msg_id) + " from " + who(h.from) +
          ": " + refusal);
      send_error(in, h.from, h.type == MessageType::Hello ? ErrorReason::Incompatible : ErrorReason::Rejected,
                 h.msg_id, h.type == MessageType::Hello, refusal);
      return;
    }
    ++result.messages_received;
    // Stored before acknowledged: once the sender hears the ack it never sends this again.
    const bool repeat = h.type != MessageType::Hello && already_have(h, msg.payload);
    if (repeat) ++result.duplicates;
    if (h.type != MessageType::Hello && !repeat) {
      store->store_received(h.from, h.msg_id, h.type, plaintext);  // as it arrived; decoded again on a restart
      accept(h, std::move(msg.payload), true);
    } else if (h.type == MessageType::Hello) {
      say(who(h.from) + " says hello (" + printable(std::get<Hello>(msg.payload).software) + ")");
    }
    store->save_replay(replay);
    send_ack(in, h.from, h.msg_id);
  }

  // Empty when acceptable; otherwise why not.
  std::string check(const EnvelopeHeader& h, const Payload& p) const {
    const std::string where = std::string(to_string(h.type)) + " from " + who(h.from);
    if (h.type == MessageType::Hello) {
      const auto& hello = std::get<Hello>(p);
      std::ostringstream why;
      if (hello.method != config.method.method) why << "method " << printable(hello.method) << " is not " << config.method.method;
      else if (hello.backbone_fingerprint != config.backbone_fingerprint)
        why << "backbone " << printable(hello.backbone_fingerprint) << " is not " << config.backbone_fingerprint;
      else if (hello.dim != ctx.dim) why << "feature dimension " << hello.dim << " is not " << ctx.dim;
      else if (hello.num_classes != ctx.num_classes) why << hello.num_classes << " classes, not " << ctx.num_classes;
      return why.str();
    }
    const auto kind = routing_kind(h.type);
    if (!kind || !plan.expects(h.from, *kind))
      return "the topology does not send this node " + std::string(to_string(h.type)) + " from there";
    const Contributors* contributors = nullptr;
    if (h.type == MessageType::Head) {
      const auto& hm = std::get<HeadMessage>(p);
      if (hm.backbone_fingerprint != config.backbone_fingerprint) return "head for another backbone";
      if (hm.head->dim() != ctx.dim || hm.head->num_classes() != ctx.num_classes)
        return "head of shape " + std::to_string(hm.head->dim()) + " -> " + std::to_string(hm.head->num_classes());
      contributors = &hm.contributors;
    } else {
      const auto& k = std::get<Knowledge>(p);
      // The method's own checks too: a piece that would make merging fail is refused now,
      // before it is stored and acknowledged, not found out in phase 1.
      method->validate(k, ctx, where);
      contributors = &k.contributors;
    }
    for (NodeId c : *contributors)
      if (!config.topology.find(c)) return "contributor " + std::to_string(c) + " is not in the topology";
    if (h.type == MessageType::Knowledge) {
      const auto it = plan.sources.find(h.from);
      const Contributors possible = it != plan.sources.end() ? it->second : Contributors{};
      for (NodeId c : *contributors)
        if (!possible.count(c))
          return "contributor " + std::to_string(c) + "'s data cannot reach " + who(h.from) +
                 " in this topology (it can hold " + to_string(possible) + ")";
    }
    return "";
  }

  // A second copy of something already held (the sender redid a phase after a crash and sealed
  // it anew): acknowledged, not stored or used again.
  bool already_have(const EnvelopeHeader& h, const Payload& p) const {
    if (h.type == MessageType::Head) {
      // A head covering more than the one held is the hub's refit on knowledge that came late.
      const Contributors& covers = std::get<HeadMessage>(p).contributors;
      return hub_head && std::includes(hub_head->contributors.begin(), hub_head->contributors.end(), covers.begin(),
                                       covers.end());
    }
    const auto& k = std::get<Knowledge>(p);
    const auto kind = *routing_kind(h.type);
    for (const auto& piece : pieces)
      if (piece.from == h.from && piece.kind == kind && piece.knowledge.contributors == k.contributors) return true;
    return false;
  }

  void accept(const EnvelopeHeader& h, Payload payload, bool fresh) {
    const auto kind = *routing_kind(h.type);
    if (h.type == MessageType::Head) {
      const bool refreshed = hub_head.has_value();
      hub_head = std::get<HeadMessage>(std::move(payload));
      hub_head_arrived = Clock::now();
      progress.received(h.from, kind);
      say(std::string(refreshed ? "received a refitted head from " : "received the head from ") + who(h.from) +
          " (contributors " + to_string(hub_head->contributors) + ")");
      if (fresh && progress.stage() == PlanProgress::Stage::Done) adopt_late_head(h.from);
      return;
    }
    Piece piece;
    piece.from = h.from;
    piece.seq = h.msg_id;
    piece.kind = kind;
    piece.knowledge = std::get<Knowledge>(std::move(payload));
    // A sender's own data comes last among what it sends one node (stop-and-wait keeps the
    // order), so the piece naming it completes what the plan waits for from it.
    const bool completes = piece.knowledge.contributors.count(h.from) != 0 || kind == PlanMessage::Complete;
    if (fresh && config.callbacks.knowledge) call_back([&] { config.callbacks.knowledge(h.from, piece.knowledge); });
    if (fresh)
      say("received " + std::string(to_string(h.type)) + " from " + who(h.from) + " (contributors " +
          to_string(piece.knowledge.contributors) + ")");
    const bool after_phase1 = progress.stage() != PlanProgress::Stage::Gather;
    piece.late = after_phase1 && kind == PlanMessage::Knowledge &&
                 std::find(plan.late_from.begin(), plan.late_from.end(), h.from) == plan.late_from.end();
    pieces.push_back(std::move(piece));
    if (completes) progress.received(h.from, kind);
    if (piece_is_late_input()) refit_pending = true;
  }

  // The hub's head, after this node gave up on it and fitted one on its own data: it replaces
  // that one if it covers this node's data too (a hub that gave up on this node in turn sends
  // a head without it), and the hub is no longer missing.
  void adopt_late_head(NodeId from) {
    const Contributors& covers = hub_head->contributors;
    if (!std::includes(covers.begin(), covers.end(), result.contributors.begin(), result.contributors.end())) {
      say("keeping the head on " + to_string(result.contributors) + ": the head from " + who(from) +
          ", which came after the deadline, covers only " + to_string(covers));
      return;
    }
    say("taking the head from " + who(from) + ", which came after the deadline");
    set_head(hub_head->head, hub_head->contributors);
    if (!done) return;
    score();  // finished already: the result is written again when the node closes
    say("now " + std::string(to_string(result.status)) + " with contributors " + to_string(result.contributors));
  }

  bool piece_is_late_input() const { return !pieces.empty() && pieces.back().late; }

  // --- sending ------------------------------------------------------------------------------

  // Seals (with the next message id), writes to the outbox, then leaves it to pump_sends().
  template <class Seal>
  void enqueue(NodeId to, MessageType type, int phase, int64_t counted_bytes, Seal&& seal) {
    OutboxEntry e;
    e.seq = store->next_seq();
    e.to = to;
    e.type = type;
    e.phase = phase;
    e.msg_id = store->next_msg_id();
    e.frame = seal(e.msg_id);
    e.counted_bytes = counted_bytes;
    // A receiver's transport drops a larger frame (ZMQ_MAXMSGSIZE) without telling anyone, and the
    // resends would be dropped too: say so here, where the cause is known, instead.
    if (e.frame.size() > config.limits.max_message_bytes)
      throw InputError("node " + std::to_string(config.id) + ": the " + to_string(type) + " message for " + who(to) +
                       " would be " + std::to_string(e.frame.size()) + " bytes, above max_message_bytes (" +
                       std::to_string(config.limits.max_message_bytes) +
                       ") that nodes accept; send less (fewer components, a smaller feature expansion), or "
                       "raise the limit at every node (Limits::max_message_bytes in an embedding application's "
                       "NodeConfig; fednode run uses the default)");
    outbox->add(std::move(e));
    result.knowledge_bytes_sent += counted_bytes;  // queued, so sent: the outbox keeps trying
  }

  void queue(NodeId to, MessageType type, int phase, const Payload& payload, int64_t counted_bytes) {
    enqueue(to, type, phase, counted_bytes, [&](uint64_t id) { return channel.seal(to, id, payload, encode); });
  }

  // Knowledge is sealed without copying it into a Payload (tens of megabytes for FedPFT).
  void queue_knowledge(NodeId to, const Knowledge& k, MessageType type, int phase) {
    enqueue(to, type, phase, k.payload_bytes(half_transfer),
            [&](uint64_t id) { return channel.seal(to, id, k, encode, type); });
  }

  // Acks and errors are answers: sealed like everything else, never stored or resent.
  void send_ack(const Incoming& in, NodeId to, uint64_t acked) {
    Ack a;
    a.acked_id = acked;
    answer(in, to, Payload(a));
  }
  void send_error(const Incoming& in, NodeId to, ErrorReason reason, uint64_t ref, bool abort, const std::string& text) {
    if (!channel.knows(to)) return;
    ErrorMessage e;
    e.reason = reason;
    e.ref_id = ref;
    e.abort = abort;
    e.text = text.substr(0, 500);
    answer(in, to, Payload(e));
  }
  void answer(const Incoming& in, NodeId to, const Payload& p) {
    const std::string frame = channel.seal(to, store->next_msg_id(), p);
    if (transport->reply(in, frame)) result.bytes_sent += static_cast<int64_t>(frame.size());
    else say("could not answer " + who(to) + ": its connection is gone (it will resend)");
  }

  void pump_sends() {
    const SendTally sent = outbox->pump();
    result.bytes_sent += sent.bytes;
    result.messages_sent += sent.messages;
    result.resends += sent.resends;
  }

  // --- the plan -------------------------------------------------------------------------------

  void set_head(std::shared_ptr<const Head> h, const Contributors& contributors) {
    head = std::move(h);
    result.contributors = contributors;
    store->save_head(*head, contributors);
    if (config.callbacks.head) call_back([&] { config.callbacks.head(*head, contributors); });
  }

  // run_admitting (node/phases.h) over the pieces held, logging and discarding as it goes.
  template <class Work>
  auto with_admission(const std::string& what, Work&& work) {
    return run_admitting(
        std::vector<ReceivedPiece>(pieces.begin(), pieces.end()), std::forward<Work>(work),
        [&](const std::string& why) { say(what + " failed: " + why + "; trying the received pieces one at a time"); },
        [&](const ReceivedPiece& p, const std::string& why) { discard(p, why); });
  }

  void discard(const ReceivedPiece& p, const std::string& why) {
    say("discarding message " + std::to_string(p.seq) + " from " + who(p.from) + " (contributors " +
        to_string(p.knowledge.contributors) + "): " + why);
    add_once(result.discarded_from, p.from);
    // `p` may be one of `pieces`: copy the key before moving elements around.
    const NodeId from = p.from;
    const uint64_t seq = p.seq;
    const PlanMessage kind = p.kind;
    pieces.erase(std::remove_if(pieces.begin(), pieces.end(),
                                [&](const Piece& q) { return q.from == from && q.seq == seq && q.kind == kind; }),
                 pieces.end());
  }

  void phase1() {
    say("merging what arrived with " + std::to_string(config.local.size()) + " local samples (" + method->name() + ")");
    PhaseOne out = with_admission("merging", [&](const std::vector<ReceivedPiece>& received) {
      return run_phase_one(*method, plan, received, config.local, ctx);
    });
    result.seconds_merge += out.merge_seconds;
    result.seconds_head += out.head_seconds;
    if (out.head) set_head(std::shared_ptr<const Head>(std::move(out.head)), out.head_contributors);
    for (NodeId to : plan.forward_to)
      for (const auto& k : out.outgoing) queue_knowledge(to, k, MessageType::Knowledge, 1);
    for (NodeId to : plan.feedback_to)
      for (const auto& k : out.outgoing) queue_knowledge(to, k, MessageType::Knowledge, 1);
    if (out.complete) queue_knowledge(*plan.complete_to, out.outgoing[*out.complete], MessageType::Complete, 1);
    if (head) send_head(head, result.contributors, 1);
    store->set_marker("phase1");
    progress.merged();
    stage_started = Clock::now();
    if (head) say("phase 1 done: head fitted on " + to_string(result.contributors));
  }

  // A star hub's head to its leaves: in phase 1, and offered again (kOfferPhase) whenever knowledge
  // that came late makes the hub refit it, since a leaf still running takes a head that covers more.
  void send_head(const std::shared_ptr<const Head>& h, const Contributors& contributors, int phase) {
    if (plan.send_head_to.empty()) return;
    HeadMessage hm;
    hm.head = h;
    hm.contributors = contributors;
    hm.backbone_fingerprint = config.backbone_fingerprint;
    const int64_t bytes = head_bytes(*h);
    for (NodeId to : plan.send_head_to) queue(to, MessageType::Head, phase, Payload(hm), bytes);
    if (phase == kOfferPhase)
      say("offering the refitted head to " +
          to_string(Contributors(plan.send_head_to.begin(), plan.send_head_to.end())));
  }

  // A leaf whose hub's head leaves out the leaf's own data (the hub gave up on it before its
  // knowledge came) waits up to a deadline for the refit the hub makes when that knowledge does
  // come, unless the hub refused it.
  bool waiting_for_refit() {
    if (!plan.head_from || !hub_head || config.local.size() == 0 || hub_head->contributors.count(config.id))
      return false;
    const auto refusers = outbox->refusers();
    if (std::find(refusers.begin(), refusers.end(), *plan.head_from) != refusers.end()) return false;
    const bool waiting = seconds_since(hub_head_arrived) <= plan.deadline_seconds;
    if (waiting && !said_waiting_for_refit) {
      said_waiting_for_refit = true;
      say("the head from " + who(*plan.head_from) + " leaves out this node's data; waiting up to " +
          seconds_text(plan.deadline_seconds) + " s for the hub to refit it with that data");
    }
    return waiting;
  }

  void phase2() {
    if (plan.head_from) {
      if (hub_head) {
        if (config.local.size() > 0 && !hub_head->contributors.count(config.id))
          say("the head from " + who(*plan.head_from) + " covers " + to_string(hub_head->contributors) +
              ", not this node's own data (its hub gave up on it)");
        set_head(hub_head->head, hub_head->contributors);
      } else {
        // The hub never answered: a head on the node's own data is better than none.
        say("no head from " + who(*plan.head_from) + "; fitting one on the local data only");
        Refit r = refit_head(*method, {}, config.local, ctx);
        result.seconds_head += r.seconds;
        set_head(std::shared_ptr<const Head>(std::move(r.head)), r.contributors);
      }
    }
    if (plan.complete_from) {
      const Piece* complete = nullptr;
      for (const auto& p : pieces)
        if (p.kind == PlanMessage::Complete) complete = &p;
      if (complete) {
        // Partial when a node upstream gave up on someone: then what this node already holds
        // (its phase-1 inputs) still counts, combined with it, rather than being thrown away.
        const Contributors& covers = complete->knowledge.contributors;
        const bool partial = !std::includes(covers.begin(), covers.end(), result.contributors.begin(),
                                            result.contributors.end());
        say("refitting the head on the complete knowledge " + to_string(covers) +
            (partial ? ", with the knowledge this node holds, since it covers less than " +
                           to_string(result.contributors)
                     : std::string()));
        std::vector<Knowledge> inputs;
        if (partial) inputs = knowledge_in_order(pieces);  // the Knowledge pieces
        inputs.push_back(complete->knowledge);
        std::optional<Refit> r;
        try {
          r = refit_head(*method, inputs, config.local, ctx);
        } catch (const InputError& e) {
          discard(*complete, e.what());  // the head of phase 1 stays
        }
        if (r) {
          result.seconds_head += r->seconds;
          set_head(std::shared_ptr<const Head>(std::move(r->head)), r->contributors);
          if (plan.complete_to) queue_knowledge(*plan.complete_to, complete->knowledge, MessageType::Complete, 2);
        }
      }
    }
    if (!plan.late_from.empty() || refit_pending) refit();
    store->set_marker("phase2");
    progress.completed();
  }

  // Knowledge that came after phase 1 (feedback, or past the deadline): merged for the head only.
  void refit() {
    refit_pending = false;
    const Contributors covers = held_contributors();
    if (covers == result.contributors) return;
    say("refitting the head with knowledge that came after phase 1: " + to_string(covers));
    Refit r = with_admission("refitting", [&](const std::vector<ReceivedPiece>& held) {
      return refit_head(*method, knowledge_in_order(held), config.local, ctx);
    });
    result.seconds_head += r.seconds;
    std::shared_ptr<const Head> refitted(std::move(r.head));
    // Offered before it is saved: a node killed in between refits again on its restart (see
    // restore) and offers the same head twice, which a leaf takes once; the other order could
    // leave a saved head that no leaf is ever offered.
    send_head(refitted, r.contributors, kOfferPhase);
    set_head(refitted, r.contributors);
  }

  // Whose data a head on the Knowledge pieces held and the local data would cover.
  Contributors held_contributors() const {
    return select_for_combination(knowledge_in_order(pieces), &config.local, ctx, config.method.method).contributors;
  }

  // Knowledge stored after the last head was fitted (the node was killed before it refitted)
  // makes a restarted node refit.
  bool held_knowledge_adds_to_head() const {
    const Contributors covers = held_contributors();
    return covers != result.contributors && std::includes(covers.begin(), covers.end(), result.contributors.begin(),
                                                          result.contributors.end());
  }

  void report_missing(double deadline) {
    for (NodeId m : progress.missing())
      if (add_once(result.missing, m))
        say(who(m) + " missed the deadline of " + seconds_text(deadline) + " s; going on without it");
  }

  void advance() {
    const double waited = seconds_since(stage_started);
    if (progress.stage() == PlanProgress::Stage::Gather) {
      if (!progress.ready_to_merge() && waited > plan.deadline_seconds) {
        progress.deadline_passed();
        report_missing(plan.deadline_seconds);
      }
      if (progress.ready_to_merge()) {
        result.seconds_waiting += waited;
        phase1();
      }
    }
    if (progress.stage() == PlanProgress::Stage::Return) {
      if (!progress.ready_to_complete() && seconds_since(stage_started) > plan.return_deadline_seconds) {
        progress.deadline_passed();
        report_missing(plan.return_deadline_seconds);
      }
      if (progress.ready_to_complete() && !waiting_for_refit()) {
        result.seconds_waiting += seconds_since(stage_started);
        phase2();
      }
    }
    if (progress.finished() && refit_pending) refit();
    pump_sends();
    if (progress.finished() && !done) {
      if (done_at == Clock::time_point{}) done_at = Clock::now();
      if (outbox->settled()) finish(NodeStatus::Finished);
      // Offers still open then do not make the node incomplete; frames its plan sends do.
      else if (seconds_since(done_at) > config.ack_deadline_seconds)
        finish(outbox->unacknowledged().empty() ? NodeStatus::Finished : NodeStatus::Incomplete);
    }
  }

  // True once a finished node has answered long enough: at least closing_grace after finishing,
  // and no frame for closing_quiet (a peer still resending keeps it answering, up to 10 s).
  bool closed(std::chrono::milliseconds budget) {
    const auto until = Clock::now() + budget;
    do {
      if (auto in = transport->receive(std::chrono::milliseconds(20))) handle(*in);
      if (refit_pending) {
        // Knowledge that came while closing (a star leaf's, after its hub's head reached
        // everyone) is used, not only stored: back to the plan, which refits, offers the new
        // head and finishes again.
        say("knowledge came while closing; refitting before finishing");
        done = false;
        done_at = {};  // what the refit sends gets its own time to be acknowledged
        return false;
      }
      const double open_for = seconds_since(closing_since);
      if (open_for >= 10.0 || (open_for >= kClosingGrace && seconds_since(last_frame) >= kClosingQuiet)) {
        // What happened while closing (duplicates answered, frames rejected, a late head) counts too.
        say_rejections_left_out();
        store->write_text("result.json", result_json(result, config.topology, config.run_name));
        return true;
      }
    } while (Clock::now() < until);
    return false;
  }
  static constexpr double kClosingGrace = 1.0, kClosingQuiet = 0.5;

  // One turn of the event loop (Node::step).
  bool step(std::chrono::milliseconds budget, const std::atomic<bool>& stop) {
    if (done) return stop.load() || closed(budget);
    if (stop.load()) {
      finish(NodeStatus::Stopped);
      return true;
    }
    // Merging and fitting stop early when asked to (NodeContext::stop); the phase is then redone
    // from the stored inputs by the next run of the same command.
    const auto advance_unless_stopped = [this] {
      try {
        advance();
        return true;
      } catch (const Interrupted&) {
        say("stopped in the middle of merging or fitting; the same command starts that again");
        finish(NodeStatus::Stopped);
        return false;
      }
    };
    const auto until = Clock::now() + budget;
    // What is waiting first, so that one step drains a burst of frames; but at most a burst, so
    // that a peer flooding the node does not keep it from its plan (merging, sends, deadlines).
    for (int i = 0; i < kFramesPerStep; ++i) {
      auto in = transport->receive(std::chrono::milliseconds(0));
      if (!in) break;
      handle(*in);
    }
    if (!advance_unless_stopped()) return true;
    if (done) return closed(std::chrono::milliseconds(0));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() > 0) {
      if (auto in = transport->receive(outbox->until_next_resend(left))) handle(*in);  // wake for a resend
    }
    if (!advance_unless_stopped()) return true;
    return done && closed(std::chrono::milliseconds(0));
  }

  bool covers_plan() const {
    return std::includes(result.contributors.begin(), result.contributors.end(),
                         result.expected_contributors.begin(), result.expected_contributors.end());
  }

  // The result's status, head and accuracy from what the node holds now.
  void score() {
    // Missing: given up on at a deadline and never delivered. A sender whose message came late
    // (and was used: merged into a refit, or a hub's head taken) is not, so a node restarted
    // later, which knows only what it holds, says the same.
    const std::vector<NodeId> never = progress.missing();
    result.missing.erase(std::remove_if(result.missing.begin(), result.missing.end(),
                                        [&](NodeId m) { return !std::binary_search(never.begin(), never.end(), m); }),
                         result.missing.end());
    // A node whose knowledge or head a peer refused has not done its part of the plan, even if
    // its own head is fine.
    // Nor has one whose head leaves out data the plan meant it to cover (a peer upstream gave up
    // on someone, and what reached this node is partial), even if nobody was missing here.
    const bool short_of_plan = !result.missing.empty() || !result.refused_by.empty() ||
                               !result.discarded_from.empty() || !head || !covers_plan();
    result.status = finish_status == NodeStatus::Finished && short_of_plan ? NodeStatus::Incomplete : finish_status;
    result.head = head;
    if (head && config.test) {
      result.accuracy = head->accuracy(*config.test);
      result.per_class = head->per_class_accuracy(*config.test);
    }
  }

  void finish(NodeStatus status) {
    done = true;
    say_rejections_left_out();
    closing_since = Clock::now();
    // From the outbox as it stands (a node that reopened to refit may finish twice).
    result.refused_by.clear();
    result.unacknowledged.clear();
    for (NodeId id : outbox->refusers()) add_once(result.refused_by, id);
    for (NodeId id : outbox->unacknowledged()) add_once(result.unacknowledged, id);
    if (status != NodeStatus::Stopped) outbox->give_up_offers();  // a stopped node offers on when continued
    finish_status = status;
    score();
    result.seconds_total = seconds_since(started);
    store->write_text("result.json", result_json(result, config.topology, config.run_name));
    std::ostringstream msg;
    msg << to_string(result.status);
    if (result.accuracy >= 0) msg << ": accuracy " << std::fixed << std::setprecision(4) << result.accuracy;
    msg << " with contributors " << to_string(result.contributors);
    if (head && !covers_plan()) msg << ", short of the plan's " << to_string(result.expected_contributors);
    if (!head) msg << ", without a head";
    // Whatever made the node incomplete, named where the reader looks first.
    const auto list = [&](const char* what, const std::vector<NodeId>& ids) {
      if (!ids.empty()) msg << "; " << what << " " << to_string(Contributors(ids.begin(), ids.end()));
    };
    list("missing", result.missing);
    list("refused by", result.refused_by);
    list("discarded knowledge from", result.discarded_from);
    list("unacknowledged by", result.unacknowledged);
    say(msg.str());
  }
};

Node::Node(NodeConfig config, Identity identity) : impl_(std::make_unique<Impl>(std::move(config), std::move(identity))) {
  impl_->ctx.stop = &stop_;
  impl_->start();
}

namespace {
// The nodes each thread is inside step() or run() of, for ~Node.
thread_local std::vector<const Node*> t_driven;

// Counts the threads inside step() or run() of one node, and notes the node for this thread.
class Driving {
 public:
  Driving(const Node* node, std::atomic<int>& count) : count_(count) {
    ++count_;
    t_driven.push_back(node);
  }
  ~Driving() {
    t_driven.pop_back();
    --count_;
  }
  Driving(const Driving&) = delete;
  Driving& operator=(const Driving&) = delete;

 private:
  std::atomic<int>& count_;
};
}  // namespace

Node::~Node() {
  // A thread still inside step() or run() would go on using what is destroyed here: stop it at
  // its next step and wait until it is out. Unless that thread is this one (a callback
  // destroying its own node): it can never come out while we wait.
  stop_.store(true);
  if (std::find(t_driven.begin(), t_driven.end(), this) != t_driven.end()) return;
  while (driving_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

bool Node::step(std::chrono::milliseconds budget) {
  const Driving driving(this, driving_);
  const bool done = impl_->step(budget, stop_);
  impl_->rethrow_callback_error();
  return done;
}

NodeResult Node::run() {
  const Driving driving(this, driving_);
  while (!step(std::chrono::milliseconds(200))) {
  }
  return impl_->result;
}

const NodeResult& Node::result() const { return impl_->result; }
const std::string& Node::state_dir() const { return impl_->store->dir(); }

std::string result_json(const NodeResult& r, const Topology& topology, const std::string& run_name) {
  std::ostringstream out;
  JsonWriter w(out);
  w.begin_object();
  w.key("fednode_node_result").value(1);
  w.key("id").value(r.id);
  const auto* n = topology.find(r.id);
  w.key("name").value(n ? n->name : std::string());
  w.key("run").value(run_name);
  w.key("method").value(topology.federation.method);
  w.key("mode").value(to_string(topology.federation.mode));
  w.key("status").value(to_string(r.status));
  w.key("samples").value(r.samples);
  w.key("contributors").array_of(r.contributors);
  w.key("expected_contributors").array_of(r.expected_contributors);
  w.key("missing").array(r.missing);
  w.key("unacknowledged").array(r.unacknowledged);
  w.key("refused_by").array(r.refused_by);
  w.key("discarded_from").array(r.discarded_from);
  if (r.accuracy >= 0) {
    w.key("accuracy").value(r.accuracy);
    std::vector<double> per_class;
    for (const auto& c : r.per_class) per_class.push_back(c.total ? c.value() : NAN);
    w.key("per_class_accuracy").array(per_class);
  } else {
    w.key("accuracy").null();
  }
  w.key("head").value(r.head ? std::string("head") : std::string());
  w.key("bytes_sent").value(r.bytes_sent);
  w.key("bytes_received").value(r.bytes_received);
  w.key("knowledge_bytes_sent").value(r.knowledge_bytes_sent);
  w.key("messages_sent").value(r.messages_sent);
  w.key("messages_received").value(r.messages_received);
  w.key("resends").value(r.resends);
  w.key("frames_rejected").value(r.frames_rejected);
  w.key("duplicates").value(r.duplicates);
  w.key("restarts").value(r.restarts);
  w.key("seconds").begin_object();
  w.key("total").value(r.seconds_total);
  w.key("waiting").value(r.seconds_waiting);
  w.key("merge").value(r.seconds_merge);
  w.key("head").value(r.seconds_head);
  w.end_object();
  w.end_object();
  out << "\n";
  return out.str();
}

}  // namespace fednode
