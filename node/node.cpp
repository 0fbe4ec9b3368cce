// fednode::Node composes a node: its transport (ZeroMQ), its inbox (open, check, store,
// acknowledge), its outbox (store, send, resend until acknowledged), its state store, and the
// machine that decides what the node does (node/machine.h). What is here is only the driving:
// frames to the inbox, the machine's actions to the store and the outbox, time to the machine,
// and when the node is done, the closing that keeps it answering for a moment.
#include "node/node.h"

#include "methods/fedcgs/personalize.h"

#include "crypto/noise_key.h"
#include "crypto/run_id.h"
#include "node/discovery.h"
#include "node/closing.h"
#include "node/configuration_record.h"
#include "core/elapsed.h"
#include "node/inbox.h"
#include "node/machine.h"
#include "node/member.h"
#include "node/node_config.h"
#include "node/node_result.h"
#include "node/node_status.h"
#include "node/standing_files.h"
#include "node/outbox.h"
#include "node/secure_aggregation.h"
#include "node/secure_channel.h"
#include "node/secure_stream.h"
#include "node/state_store.h"
#include "topology/plan.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>
#include <utility>

namespace fednode {
namespace {

using Clock = std::chrono::steady_clock;

// Frames handled before the node looks at its plan again (Node::step).
constexpr int kFramesPerStep = 256;
constexpr double kInboundSampling = 0.5;  // seconds between samples of inbound progress

}  // namespace

struct Node::Impl {
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
  std::unique_ptr<Machine> machine;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<StateStore> store;
  std::unique_ptr<Outbox> outbox;
  std::unique_ptr<Inbox> inbox;
  std::unique_ptr<Closing> closing;  // once finished: how long to keep answering
  std::unique_ptr<Discovery> discovery;  // NodeConfig::discover
  EncodeOptions encode;
  SendTally sent;
  std::map<NodeId, int64_t> sent_to;  // the outbox's bytes by peer, over the whole run

  Clock::time_point started = Clock::now(), done_at{}, inbound_sampled{};
  mutable std::string last_line;  // what the node said last, for status.json
  std::unique_ptr<StandingFiles> files;
  bool done = false;
  NodeStatus finish_status = NodeStatus::Running;  // what finish() was called with
  NodeResult result;
  // An exception from the application's callback must not leave the node half-way through what
  // it was doing (a message stored but neither counted nor acknowledged, a head saved but not
  // sent): the first one is kept, and Node::step rethrows it once the step's work is done.
  mutable std::exception_ptr callback_error;

  Impl(NodeConfig c, Identity identity)
      : config(std::move(c)),
        plan(plan_for(config.topology, config.id, plan_options(config.method))),
        curve_keys(config.topology.hop_encryption() == HopEncryption::Curve
                       ? std::make_shared<const CurveKeyPair>(identity)
                       : nullptr),
        noise_key(derive_noise_key(identity, derive_run_id(config.run_name))),
        masks(member_masks(config.topology, plan, config.method, identity, config.id, peer_keys(config.topology),
                           derive_run_id(config.run_name))),
        channel(std::move(identity), config.id, derive_run_id(config.run_name), peer_keys(config.topology),
                config.limits) {}

  double now() const { return seconds_since(started); }
  double ack_deadline() const {
    return config.ack_deadline_seconds.value_or(config.topology.federation.ack_deadline_seconds);
  }
  std::string who(NodeId id) const { return config.topology.describe(id); }
  void say(const std::string& msg) const { log(LogLevel::Info, msg); }
  void warn(const std::string& msg) const { log(LogLevel::Warning, msg); }
  void log(LogLevel level, const std::string& msg) const {
    if (level <= config.log_level) {
      last_line = msg;
      if (config.callbacks.log) call_back([&] { config.callbacks.log(level, msg); });
      else if (config.callbacks.progress) call_back([&] { config.callbacks.progress(msg); });
    }
    // A node says something at every epoch of a long fit, inside one step: the status follows,
    // also when the line is not shown (or `fednode status` would call a quiet node unresponsive).
    write_status();
  }
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

  // --- start-up -----------------------------------------------------------------------------

  void start(const std::atomic<bool>* stop) {
    check_node_config(config, plan);
    method = make_method(config.method);
    Member member = assemble_member(member_inputs(config, plan, *method, noise_key, std::move(masks)));
    MachineConfig& m = member.machine;
    m.ctx.stop = stop;
    result.privacy = std::move(member.privacy);
    encode.precision = m.transfer;
    m.say = sink();
    if (config.callbacks.progress || config.callbacks.log) m.ctx.progress = [this](const std::string& line) { say(line); };
    if (config.callbacks.knowledge)
      m.on_knowledge = [this](NodeId from, const Knowledge& k) { call_back([&] { config.callbacks.knowledge(from, k); }); };
    machine = std::make_unique<Machine>(std::move(m));
    result.id = config.id;
    result.samples = config.local.size();
    result.expected_contributors = plan.expected_contributors;
    // Bound before the state directory is touched: a second copy of a running node fails here.
    const auto& topo = config.topology;
    open_transport();
    store = std::make_unique<StateStore>(config.state_dir.empty() ? topo.state_dir_of(config.id) : config.state_dir,
                                         channel.run(), config.limits.max_message_bytes + 4096);
    store->describe_heads(head_card(config));
    files = std::make_unique<StandingFiles>(store->path("status.json"), config.metrics_path, sink());
    const Say say_line = sink();
    const auto name = [this](NodeId id) { return who(id); };
    // The outbox stores payloads and seals them at each handover: as a version-2 stream for a
    // peer that opens them (Inbox::stream_cipher) when large, else as one frame.
    outbox = std::make_unique<Outbox>(
        *store, *transport,
        OutboxTiming{config.retry_initial, config.resend_after, std::min(10.0, topo.federation.deadline_seconds)},
        say_line, name, config.id, config.limits.max_message_bytes,
        [this](const OutboxEntry& e, std::string payload) -> Outbox::Handover {
          const auto cipher = inbox->stream_cipher(e.to);
          if (cipher && payload.size() >= kStreamFromBytes)
            return channel.seal_stream(e.to, e.msg_id, e.type, std::move(payload), *cipher, kDefaultStreamChunk);
          return channel.seal_encoded(e.to, e.msg_id, e.type, payload);
        });
    check_configuration(*store, config);
    inbox = std::make_unique<Inbox>(channel, *store, *transport, *outbox, *machine, say_line, name,
                                    Pacing{config.receive_window.value_or(
                                               static_cast<size_t>(config.topology.federation.receive_window)),
                                           config.receive_clearance,
                                           std::chrono::milliseconds(static_cast<int64_t>(ack_deadline() * 500))});
    closing = std::make_unique<Closing>(*inbox, ack_deadline(), say_line, name);
    restore();
    std::set<NodeId> sought;
    for (NodeId peer : plan.peers()) {
      transport->add_peer(peer, topo.node(peer).address);
      if (topo.node(peer).address.empty()) {
        sought.insert(peer);
        continue;
      }
      const std::string problem = Transport::resolution_problem(topo.node(peer).address);
      if (!problem.empty())
        warn("the address of " + who(peer) + " (" + topo.node(peer).address + "): " + problem +
            "; retrying in the background, but check the topology file or the name service");
    }
    // Beacons go out from now on, so peers can find this node while it still loads or fits.
    if (config.discover)
      discovery = std::make_unique<Discovery>(topo, config.id, channel.run(), transport->bound_port(), std::move(sought),
                                              config.discovery_interfaces, sink(), [this](NodeId id) { return who(id); });
    // Its earlier process may have been killed between recording an ack and sending the receipt,
    // and a receiver that waits for that receipt hears nothing else from a sender with nothing
    // left to resend it (a star's hub whose heads were all acknowledged).
    if (result.restarts > 0) inbox->receipts_again(outbox->recorded_acks());
    if (!store->has_marker("hello")) {
      for (NodeId peer : plan.recipients()) queue(peer, MessageType::Hello, 0, Payload(hello_of(config)), 0);
      store->set_marker("hello");
    }
    say(describe_plan(topo, plan));
  }

  // Hop encryption (docs/security.md, "Layer 2"): the topology decides, for every node alike.
  void open_transport() {
    TransportOptions t = transport_options(config, curve_keys);
    if (curve_keys)
      say("hops: CurveZMQ, admitting the " + std::to_string(t.curve.peers.size()) + " keys of " + config.topology.source);
    else if (config.topology.beyond_loopback())
      warn("hops: plain TCP beyond loopback (hop_encryption = \"none\"): any client that reaches this node's port "
          "can make it hold memory until the connection closes (docs/security.md, \"Memory a stranger can pin\")");
    if (!t.log && (config.callbacks.progress || config.callbacks.log))
      t.log = [this](const std::string& line) { warn(line); };
    const auto& me = config.topology.node(config.id);
    // Without an address or bind, any free port: discovery's beacons tell the peers which.
    const std::string bind = !me.bind.empty() ? me.bind : !me.address.empty() ? me.address : "tcp://*:*";
    transport = std::make_unique<Transport>(config.id, bind, t);
  }

  // A restart: take back everything the state directory holds, in the order it happened.
  void restore() {
    const auto entries = store->outbox();
    auto stored = store->received();
    result.restarts = store->count_start();
    if (result.restarts > 0)
      say("continuing from the state directory " + store->dir() + " (" + std::to_string(stored.size()) +
          " messages received, " + std::to_string(entries.size()) + " queued to send)");
    const bool phase1 = store->has_marker("phase1"), phase2 = store->has_marker("phase2");
    if (!phase1) store->drop_outgoing(1);  // redone from the inputs, deterministically
    if (!phase2) store->drop_outgoing(2);
    const auto kept = store->outbox();
    // What the phases done before the restart queued, counted as the whole run's: a phase is
    // redone only after its frames were dropped, so nothing is counted twice.
    for (const auto& e : kept) result.knowledge_bytes_sent += e.counted_bytes;
    outbox->restore(kept);
    for (NodeId peer : outbox->refusers()) machine->peer_refused(peer);
    apply(inbox->restore(std::move(stored), now()));
    std::shared_ptr<const Head> head;
    Contributors contributors;
    if (phase1 || phase2) {
      head = store->load_head(&contributors);
      for (NodeId c : contributors)
        if (!config.topology.find(c))
          throw InputError("state directory '" + store->dir() + "': its head names contributor " + std::to_string(c) +
                           ", which is not in " + config.topology.source + "; remove the directory to start over");
    }
    machine->restart(phase1, phase2, std::move(head), contributors, now());
    sync_result();
  }

  // --- the machine's actions ------------------------------------------------------------------

  void apply(Actions actions) {
    for (Action& a : actions) {
      switch (a.kind) {
        case Action::Kind::Send:
          if (a.knowledge) queue_knowledge(a);
          else if (a.payload) queue(a.to, a.type, a.phase, *a.payload, a.counted_bytes);
          else queue(a.to, a.type, a.phase, Payload(HeadMessage{a.head, a.contributors, config.backbone_fingerprint, a.class_means}),
                     a.counted_bytes);
          break;
        case Action::Kind::HeadChanged:
          store->save_head(*a.head, a.contributors);
          if (config.callbacks.head) call_back([&] { config.callbacks.head(*a.head, a.contributors); });
          break;
        case Action::Kind::PhaseDone:
          store->set_marker(a.phase == 1 ? "phase1" : "phase2");
          break;
        case Action::Kind::Say:
          say(a.line);
          break;
      }
    }
    if (machine->take_late_change() && done) {
      score();  // finished already: the result is written again when the node closes
      say("now " + std::string(to_string(result.status)) + " with contributors " + to_string(result.contributors));
    }
  }

  // Sealed with the next message id and stored before it is sent; counted as sent once queued,
  // since the outbox keeps trying.
  void queue(NodeId to, MessageType type, int phase, const Payload& payload, int64_t counted_bytes) {
    outbox->queue(to, type, phase, counted_bytes, [&](uint64_t) { return encode_payload(payload, encode); });
    result.knowledge_bytes_sent += counted_bytes;
  }
  // Knowledge is encoded without copying it into a Payload (tens of megabytes for FedPFT).
  void queue_knowledge(const Action& a) {
    outbox->queue(a.to, a.type, a.phase, a.counted_bytes, [&](uint64_t) { return encode_payload(*a.knowledge, encode); });
    result.knowledge_bytes_sent += a.counted_bytes;
  }

  // --- the loop ---------------------------------------------------------------------------------

  void receive(std::chrono::milliseconds wait) {
    if (auto in = transport->receive(wait)) apply(inbox->handle(*in, now()));
  }

  void advance() {
    if (discovery) discovery->find_peers(*transport);
    note_inbound_progress();
    apply(machine->tick(now()));
    inbox->pace();
    inbox->retry_receipts();
    inbox->remind_returned();
    const SendTally s = outbox->pump();
    sent.bytes += s.bytes;
    for (const auto& [to, bytes] : s.bytes_to) sent_to[to] += bytes;
    sent.messages += s.messages;
    sent.resends += s.resends;
    if (!machine->plan_done() || done) return;
    if (done_at == Clock::time_point{}) done_at = Clock::now();
    if (outbox->settled()) finish(NodeStatus::Finished);
    // Offers still open then do not make the node incomplete; frames its plan sends do.
    else if (seconds_since(ack_wait_started()) > ack_deadline())
      finish(outbox->unacknowledged().empty() ? NodeStatus::Finished : NodeStatus::Incomplete);
  }

  // Tells the machine when data last arrived, for its deadlines; sampled twice a second at most
  // (a hub's every connection costs three system calls), and not at all once the plan is done.
  void note_inbound_progress() {
    if (machine->plan_done() || seconds_since(inbound_sampled) < kInboundSampling) return;
    inbound_sampled = Clock::now();
    machine->inbound_progress(std::chrono::duration<double>(transport->last_inbound_progress() - started).count());
  }

  // The ack deadline counts from the end of the plan or from the last moment a frame still
  // unacknowledged moved towards its peer, whichever is later: a slow link that carries the
  // frame is waited for (docs/node.md, "Reliability"), silence is not.
  Clock::time_point ack_wait_started() {
    Clock::time_point since = done_at;
    for (NodeId to : outbox->unacknowledged()) since = std::max(since, transport->last_progress(to));
    return since;
  }

  // Merging and fitting stop early when asked to (NodeContext::stop); the phase is then redone
  // from the stored inputs by the next run of the same command.
  bool advance_unless_stopped() {
    try {
      advance();
      return true;
    } catch (const Interrupted&) {
      say("stopped in the middle of merging or fitting; the same command starts that again");
      finish(NodeStatus::Stopped);
      return false;
    }
  }

  // True once a finished node may close (node/closing.h), unless knowledge that came meanwhile
  // sends it back to its plan.
  bool closed(std::chrono::milliseconds budget) {
    const auto until = Clock::now() + budget;
    do {
      receive(std::chrono::milliseconds(20));
      if (machine->refit_due()) {
        // Knowledge that came while closing (a star leaf's, after its hub's head reached
        // everyone) is used, not only stored: back to the plan, which refits, offers the new
        // head and finishes again.
        say("knowledge came while closing; refitting before finishing");
        done = false;
        done_at = {};  // what the refit sends gets its own time to be acknowledged
        return false;
      }
      if (closing->may_close()) {
        // What happened while closing (duplicates answered, frames rejected, a late head) counts too.
        inbox->say_rejections_left_out();
        sync_result();
        store->write_text("result.json", result_json(result, config.topology, config.run_name));
        files->write_metrics(standing(), result);
        return true;
      }
    } while (Clock::now() < until);
    return false;
  }

  bool step(std::chrono::milliseconds budget, const std::atomic<bool>& stop) {
    const bool finished = step_once(budget, stop);
    sync_result();
    if (!finished) write_status();
    return finished;
  }

  // status.json and the metrics, about once a second while the node runs (node/standing_files.h),
  // from the steps and from what the node says.
  void write_status() const {
    if (!files || !machine || !outbox || done) return;  // not set up yet, or result.json's turn
    files->update([this] { return standing(); }, result);
  }

  NodeStanding standing() const {
    NodeStanding s;
    s.id = config.id;
    s.name = config.topology.node(config.id).name;
    s.pid = static_cast<long>(::getpid());
    s.updated_unix = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const Machine::Standing m = machine->standing();
    s.stage = m.stage;
    s.awaiting = m.awaiting;
    if (m.deadline_at) s.deadline_in_seconds = *m.deadline_at - now();
    for (const auto& [from, kind] : m.accepted) s.accepted.emplace_back(from, to_string(kind));
    s.unacknowledged = distinct(outbox->unacknowledged());
    s.bytes_sent = result.bytes_sent;
    s.bytes_received = result.bytes_received;
    s.links = result.links;
    s.frames_rejected = result.frames_rejected;
    s.last_line = last_line;
    return s;
  }

  bool step_once(std::chrono::milliseconds budget, const std::atomic<bool>& stop) {
    if (done) return stop.load() || closed(budget);
    if (stop.load()) {
      finish(NodeStatus::Stopped);
      return true;
    }
    const auto until = Clock::now() + budget;
    // What is waiting first, so that one step drains a burst of frames; but at most a burst, so
    // that a peer flooding the node does not keep it from its plan (merging, sends, deadlines).
    for (int i = 0; i < kFramesPerStep; ++i) {
      auto in = transport->receive(std::chrono::milliseconds(0));
      if (!in) break;
      apply(inbox->handle(*in, now()));
    }
    if (!advance_unless_stopped()) return true;
    if (done) return closed(std::chrono::milliseconds(0));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() > 0) receive(outbox->until_next_resend(left));  // wake for a resend
    if (!advance_unless_stopped()) return true;
    return done && closed(std::chrono::milliseconds(0));
  }

  // --- the result -----------------------------------------------------------------------------

  // The counters, and while the node runs, what its plan has to show so far.
  void sync_result() {
    const InboxTally& in = inbox->tally();
    result.bytes_sent = sent.bytes + in.bytes_answered;
    result.links = in.links;
    for (const auto& [to, bytes] : sent_to) result.links[to].sent += bytes;
    result.bytes_received = in.bytes_received;
    result.messages_sent = sent.messages;
    result.messages_received = in.messages_received;
    result.resends = sent.resends;
    result.frames_rejected = in.frames_rejected;
    result.frames_rejected_by = in.rejected_by;
    result.duplicates = in.duplicates;
    if (done) return;  // score() filtered `missing`
    const MachineOutcome& o = machine->outcome();
    result.contributors = o.contributors;
    result.missing = o.missing;
    result.discarded_from = o.discarded_from;
    result.seconds_waiting = o.seconds_waiting;
    result.seconds_merge = o.seconds_merge;
    result.seconds_head = o.seconds_head;
  }

  void score() {
    score_result(result, machine->outcome(), machine->never_delivered(), finish_status, config.test);
  }

  // Personalised FedCGS: the personal head, once the node's head is final. A node that cannot
  // train one (no class means came) says why and keeps its federation head as its result.
  void personalize() {
    result.personal_head.reset();
    if (!method->personalizes() || !result.head) return;
    try {
      result.personal_head = machine->personal_head();
    } catch (const InputError& e) {
      log(LogLevel::Warning, std::string("no personal head: ") + e.what());
      return;
    }
    if (!result.personal_head) return;
    store->save_personal_head(*result.personal_head);
    if (!config.test) return;
    result.personal_accuracy = result.personal_head->accuracy(*config.test);
    result.personal_per_class = result.personal_head->per_class_accuracy(*config.test);
    std::vector<int64_t> counts(static_cast<size_t>(config.local.num_classes), 0);
    for (int y : config.local.y) ++counts[static_cast<size_t>(y)];
    result.accuracy_in_own_proportions = accuracy_in_proportion(result.per_class, counts);
    result.personal_accuracy_in_own_proportions = accuracy_in_proportion(result.personal_per_class, counts);
  }

  void finish(NodeStatus status) {
    sync_result();
    done = true;
    inbox->say_rejections_left_out();
    if (closing) closing->begin();
    // From the outbox as it stands (a node that reopened to refit may finish twice).
    result.refused_by = distinct(outbox->refusers());
    result.unacknowledged = distinct(outbox->unacknowledged());
    if (status != NodeStatus::Stopped) outbox->give_up_offers();  // a stopped node offers on when continued
    finish_status = status;
    score();
    personalize();
    result.seconds_total = seconds_since(started);
    store->write_text("result.json", result_json(result, config.topology, config.run_name));
    log(result.status == NodeStatus::Finished ? LogLevel::Info : LogLevel::Warning, result_summary(result));
  }
};

Node::Node(NodeConfig config, Identity identity) : impl_(std::make_unique<Impl>(std::move(config), std::move(identity))) {
  impl_->start(&stop_);
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

}  // namespace fednode
