// fednode::Node driven (Node::Impl, node/node_impl.h): frames to the inbox, the machine's actions
// to the store and the outbox, time to the machine, and when the node is done, the closing that
// keeps it answering for a moment. node/node_start.cpp sets it up.
#include "node/node_impl.h"

#include "node/node_result.h"
#include "node/wire_message.h"

#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

namespace fednode {
namespace {

using Clock = std::chrono::steady_clock;

// Frames handled before the node looks at its plan again (Node::step).
constexpr int kFramesPerStep = 256;
constexpr double kInboundSampling = 0.5;  // seconds between samples of inbound progress

}  // namespace

void Node::Impl::log(LogLevel level, const std::string& msg) const {
  if (level <= config.log_level) {
    last_line = msg;
    if (config.callbacks.log) call_back([&] { config.callbacks.log(level, msg); });
    else if (config.callbacks.progress) call_back([&] { config.callbacks.progress(msg); });
  }
  // A node says something at every epoch of a long fit, inside one step: the status follows,
  // also when the line is not shown (or `fednode status` would call a quiet node unresponsive).
  write_status();
}

// --- the machine's actions ------------------------------------------------------------------

void Node::Impl::apply(Actions actions) {
  for (Action& a : actions) {
    switch (a.kind) {
      case Action::Kind::Send:
        if (a.knowledge) queue_knowledge(a);
        else if (a.message) queue(a.to, wire_type(a), a.phase, wire_message(a).payload, a.counted_bytes);
        else queue(a.to, MessageType::Head, a.phase,
                   Payload(HeadMessage{a.head, a.contributors, config.backbone_fingerprint, a.class_means}), a.counted_bytes);
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
    book.score_again(*machine, config.test);  // finished already: the result is written again when the node closes
    say("now " + std::string(to_string(result.status)) + " with contributors " + to_string(result.contributors));
  }
}

void Node::Impl::queue(NodeId to, MessageType type, int phase, const Payload& payload, int64_t counted_bytes) {
  outbox->queue(to, type, phase, counted_bytes, [&](uint64_t) { return encode_payload(payload, encode); });
  result.knowledge_bytes_sent += counted_bytes;
}

void Node::Impl::queue_knowledge(const Action& a) {
  outbox->queue(a.to, wire_type(a), a.phase, a.counted_bytes, [&](uint64_t) { return encode_payload(*a.knowledge, encode); });
  result.knowledge_bytes_sent += a.counted_bytes;
}

// --- the loop ---------------------------------------------------------------------------------

void Node::Impl::receive(std::chrono::milliseconds wait) {
  if (auto in = transport->receive(wait)) apply(inbox->handle(*in, now()));
}

void Node::Impl::advance() {
  if (discovery) discovery->find_peers(*transport);
  note_inbound_progress();
  apply(machine->tick(now()));
  inbox->pace();
  inbox->retry_receipts();
  inbox->remind_returned();
  book.count_sent(outbox->pump());
  if (!machine->plan_done() || done) return;
  if (done_at == Clock::time_point{}) done_at = Clock::now();
  if (outbox->settled()) finish(NodeStatus::Finished);
  // Offers still open then do not make the node incomplete; frames its plan sends do.
  else if (seconds_since(ack_wait_started()) > ack_deadline())
    finish(outbox->unacknowledged().empty() ? NodeStatus::Finished : NodeStatus::Incomplete);
}

void Node::Impl::note_inbound_progress() {
  if (machine->plan_done() || seconds_since(inbound_sampled) < kInboundSampling) return;
  inbound_sampled = Clock::now();
  machine->inbound_progress(std::chrono::duration<double>(transport->last_inbound_progress() - started).count());
}

Node::Impl::Clock::time_point Node::Impl::ack_wait_started() {
  Clock::time_point since = done_at;
  for (NodeId to : outbox->unacknowledged()) since = std::max(since, transport->last_progress(to));
  return since;
}

bool Node::Impl::advance_unless_stopped() {
  try {
    advance();
    return true;
  } catch (const Interrupted&) {
    say("stopped in the middle of merging or fitting; the same command starts that again");
    finish(NodeStatus::Stopped);
    return false;
  }
}

bool Node::Impl::closed(std::chrono::milliseconds budget) {
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
      inbox->drop_unfinished_streams();
      inbox->say_rejections_left_out();
      sync_result();
      store->write_text("result.json", result_json(result, config.topology, config.run_name));
      files->write_metrics(standing(), result);
      return true;
    }
  } while (Clock::now() < until);
  return false;
}

bool Node::Impl::step(std::chrono::milliseconds budget, const std::atomic<bool>& stop) {
  const bool finished = step_once(budget, stop);
  sync_result();
  if (!finished) write_status();
  return finished;
}

void Node::Impl::write_status() const {
  if (!files || !machine || !outbox || done) return;  // not set up yet, or result.json's turn
  files->update([this] { return standing(); }, result);
}

NodeStanding Node::Impl::standing() const {
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

bool Node::Impl::step_once(std::chrono::milliseconds budget, const std::atomic<bool>& stop) {
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
    if (!in) {
      // Only with nothing left waiting: after a long fit, a live stream's next chunks may still
      // be queued, and its silence is the node's, not the sender's.
      inbox->drop_stalled_streams(std::chrono::milliseconds(static_cast<int64_t>(config.topology.federation.silence_seconds * 1000)));
      break;
    }
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

void Node::Impl::finish(NodeStatus status) {
  sync_result();
  done = true;
  inbox->say_rejections_left_out();
  if (closing) closing->begin();
  // From the outbox as it stands (a node that reopened to refit may finish twice).
  result.refused_by = distinct(outbox->refusers());
  result.unacknowledged = distinct(outbox->unacknowledged());
  if (status != NodeStatus::Stopped) outbox->give_up_offers();  // a stopped node offers on when continued
  book.score(*machine, status, config.test);
  book.personalize(*machine, config.local, config.test, *store, sink());
  result.seconds_total = seconds_since(started);
  store->write_text("result.json", result_json(result, config.topology, config.run_name));
  log(result.status == NodeStatus::Finished ? LogLevel::Info : LogLevel::Warning, result_summary(result));
}

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
