#include "node/machine.h"

#include "node/step.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace fednode {
namespace {

// Adds `id` unless it is there already; true if it was added.
bool add_once(std::vector<NodeId>& ids, NodeId id) {
  if (std::find(ids.begin(), ids.end(), id) != ids.end()) return false;
  ids.push_back(id);
  return true;
}

bool includes(const Contributors& big, const Contributors& small) {
  return std::includes(big.begin(), big.end(), small.begin(), small.end());
}

}  // namespace

Machine::Machine(MachineConfig config)
    : config_(std::move(config)),
      progress_(config_.plan),
      folded_(config_.plan, *config_.method, config_.ctx),
      hub_head_(config_.ctx.node, config_.local->size() > 0, config_.plan.deadline_seconds) {
  outcome_.expected_contributors = config_.plan.expected_contributors;
}

Machine::~Machine() = default;

std::string Machine::who(NodeId id) const { return config_.topology->describe(id); }

void Machine::say(const std::string& line) const { config_.say(line); }
void Machine::warn(const std::string& line) const { config_.say.warn(line); }

// --- receiving --------------------------------------------------------------------------------

bool Machine::awaits_knowledge_from(NodeId from) const {
  for (PlanMessage kind : {PlanMessage::Knowledge, PlanMessage::Complete})
    if (config_.plan.expects(from, kind) && !progress_.has(from, kind)) return true;
  return false;
}

bool Machine::holds_head_covering(const Contributors& contributors) const { return hub_head_.covers(contributors); }

bool Machine::holds_knowledge(NodeId from, PlanMessage kind, const Contributors& contributors) const {
  for (const auto& piece : pieces_)
    if (piece.from == from && piece.kind == kind && piece.knowledge->contributors == contributors) return true;
  return kind == PlanMessage::Knowledge && folded_.holds(from, contributors);
}

template <class P>
KnowledgeList Machine::knowledge_held(const std::vector<P>& held) const {
  return KnowledgeList(knowledge_in_order(held), folded_.sum());
}

Actions Machine::accept_head(NodeId from, HeadOffer head, bool fresh, double now) {
  Actions out;
  const std::string covers = to_string(head.contributors);
  const bool refreshed = hub_head_.take(std::move(head), now);
  progress_.received(from, PlanMessage::Head);
  say(std::string(refreshed ? "received a refitted head from " : "received the head from ") + who(from) +
      " (contributors " + covers + ")");
  if (fresh && progress_.stage() == PlanProgress::Stage::Done) adopt_late_head(from, out);
  return out;
}

Actions Machine::accept_knowledge(NodeId from, uint64_t seq, PlanMessage kind, std::shared_ptr<const Knowledge> knowledge,
                                  bool fresh) {
  if (kind == PlanMessage::Head) throw std::logic_error("a head accepted as knowledge");
  Piece piece;
  piece.from = from;
  piece.seq = seq;
  piece.kind = kind;
  piece.knowledge = std::move(knowledge);
  // A sender's own data comes last among what it sends one node (stop-and-wait keeps the
  // order), so the piece naming it completes what the plan waits for from it.
  const bool completes = piece.knowledge->contributors.count(from) != 0 || kind == PlanMessage::Complete;
  if (fresh && config_.on_knowledge) config_.on_knowledge(from, *piece.knowledge);
  if (fresh)
    say("received " + std::string(to_string(kind)) + " from " + who(from) + " (contributors " +
        to_string(piece.knowledge->contributors) + ")");
  const auto& late_from = config_.plan.late_from;
  piece.late = progress_.stage() != PlanProgress::Stage::Gather && kind == PlanMessage::Knowledge &&
               std::find(late_from.begin(), late_from.end(), from) == late_from.end();
  const bool late = piece.late;
  if (!folded_.fold(from, kind, *piece.knowledge, "knowledge from " + who(from))) pieces_.push_back(std::move(piece));
  if (completes) progress_.received(from, kind);
  if (late) refit_pending_ = true;
  return {};
}

void Machine::peer_refused(NodeId peer) {
  if (config_.plan.head_from && peer == *config_.plan.head_from) hub_head_.hub_refused();
}

void Machine::adopt_late_head(NodeId from, Actions& out) {
  // It replaces the head fitted on local data if it covers this node's data too (a hub that gave
  // up on this node in turn sends a head without it); the hub is then no longer missing.
  const HeadOffer& offer = *hub_head_.held();
  const Contributors& covers = offer.contributors;
  if (!includes(covers, outcome_.contributors)) {
    say("keeping the head on " + to_string(outcome_.contributors) + ": the head from " + who(from) +
        ", which came after the deadline, covers only " + to_string(covers));
    return;
  }
  say("taking the head from " + who(from) + ", which came after the deadline");
  set_head(offer.head, offer.contributors, out);
  late_change_ = true;
}

void Machine::restart(bool phase1_done, bool phase2_done, std::shared_ptr<const Head> head,
                      const Contributors& head_contributors, double now) {
  stage_started_ = now;
  if (phase1_done || phase2_done) {
    outcome_.head = std::move(head);
    outcome_.contributors = head_contributors;
  }
  if (phase1_done && progress_.stage() == PlanProgress::Stage::Gather) {
    if (!progress_.ready_to_merge()) {
      // Phase 1 went on without these before the restart: they stay missing in the result.
      progress_.deadline_passed();
      for (NodeId m : progress_.missing()) add_once(outcome_.missing, m);
    }
    progress_.merged();
  }
  if (phase2_done && progress_.stage() == PlanProgress::Stage::Return) progress_.completed();
  if (progress_.finished() && config_.gate) config_.gate->on_plan_done();
  // Knowledge stored after the last head was fitted (the node was killed before it refitted).
  if (progress_.finished() && outcome_.head && held_knowledge_adds_to_head()) refit_pending_ = true;
}

void Machine::release_inputs() {
  std::vector<Piece>().swap(pieces_);
  folded_.release();
  hub_head_.release();
}

Machine::Standing Machine::standing() const {
  Standing s;
  s.accepted = progress_.arrived();
  s.awaiting = progress_.awaiting();
  const NodePlan& plan = config_.plan;
  const double from = std::max(stage_started_, last_inbound_);
  switch (progress_.stage()) {
    case PlanProgress::Stage::Gather:
      s.stage = "phase 1";
      if (!s.awaiting.empty()) s.deadline_at = from + plan.deadline_seconds;
      break;
    case PlanProgress::Stage::Return:
      s.stage = "phase 2";
      if (!s.awaiting.empty()) s.deadline_at = from + plan.return_deadline_seconds;
      break;
    case PlanProgress::Stage::Done:
      s.stage = "plan done";
      break;
  }
  return s;
}

// --- the plan ---------------------------------------------------------------------------------

Actions Machine::tick(double now) {
  Actions out;
  const NodePlan& plan = config_.plan;
  if (config_.gate) config_.gate->on_tick(out);
  if (progress_.stage() == PlanProgress::Stage::Gather) {
    if (!progress_.ready_to_merge() && now - std::max(stage_started_, last_inbound_) > plan.deadline_seconds) {
      progress_.deadline_passed();
      give_up_on_missing(plan.deadline_seconds);
    }
    if (progress_.ready_to_merge() && gate_open(out, now)) {
      outcome_.seconds_waiting += now - stage_started_;
      phase1(out, now);
    }
  }
  if (progress_.stage() == PlanProgress::Stage::Return) {
    if (!progress_.ready_to_complete() &&
        now - std::max(stage_started_, last_inbound_) > plan.return_deadline_seconds) {
      progress_.deadline_passed();
      give_up_on_missing(plan.return_deadline_seconds);
    }
    if (progress_.ready_to_complete() && !waiting_for_refit(now)) {
      outcome_.seconds_waiting += now - stage_started_;
      phase2(out);
    }
  }
  if (progress_.finished() && refit_pending_) refit(out);
  return out;
}

bool Machine::gate_open(Actions& out, double now) {
  if (!config_.gate || gate_passed_) return true;
  const auto holds = [&](NodeId m) { return progress_.has(m, PlanMessage::Knowledge); };
  MergeGate::Decision d = config_.gate->before_merge(holds, now, last_inbound_, out);
  if (d.kind == MergeGate::Decision::Kind::Wait) return false;
  gate_passed_ = true;
  if (d.kind == MergeGate::Decision::Kind::Go) {
    if (d.unmasking) config_.ctx.unmasking = std::move(d.unmasking);
    return true;
  }
  // Unreadable without the gate: those pieces are dropped, and the head stands on what is left
  // (the run ends incomplete, naming them).
  Contributors held;
  for (NodeId m : d.unreadable)
    if (holds(m)) {
      held.insert(m);
      add_once(outcome_.discarded_from, m);
    }
  warn(d.why + "; discarding the masked statistics of " + to_string(held));
  pieces_.erase(std::remove_if(pieces_.begin(), pieces_.end(), [&](const Piece& p) { return held.count(p.from) > 0; }),
                pieces_.end());
  folded_.drop_all(*config_.method, config_.ctx);
  return true;
}

void Machine::give_up_on_missing(double deadline) {
  for (NodeId m : progress_.missing())
    if (add_once(outcome_.missing, m))
      warn(who(m) + " missed the deadline of " + deadline_text(deadline) + " s; going on without it");
}

template <class Work>
auto Machine::with_admission(const std::string& what, Work&& work) {
  return run_admitting(
      std::vector<ReceivedPiece>(pieces_.begin(), pieces_.end()), std::forward<Work>(work),
      [&](const std::string& why) { warn(what + " failed: " + why + "; trying the received pieces one at a time"); },
      [&](const ReceivedPiece& p, const std::string& why) { discard(p, why); });
}

void Machine::discard(const ReceivedPiece& p, const std::string& why) {
  warn("discarding message " + std::to_string(p.seq) + " from " + who(p.from) + " (contributors " +
      to_string(p.knowledge->contributors) + "): " + why);
  add_once(outcome_.discarded_from, p.from);
  // `p` may be one of `pieces_`: copy the key before moving elements around.
  const NodeId from = p.from;
  const uint64_t seq = p.seq;
  const PlanMessage kind = p.kind;
  pieces_.erase(std::remove_if(pieces_.begin(), pieces_.end(),
                               [&](const Piece& q) { return q.from == from && q.seq == seq && q.kind == kind; }),
                pieces_.end());
}

void Machine::phase1(Actions& out, double now) {
  const NodePlan& plan = config_.plan;
  const Features& local = *config_.local;
  say("merging what arrived with " + std::to_string(local.size()) + " local samples (" + config_.method->name() + ")");
  PhaseOne one = with_admission("merging", [&](const std::vector<ReceivedPiece>& received) {
    return run_phase_one(*config_.method, plan, received, folded_.sum(), local, config_.ctx);
  });
  outcome_.seconds_merge += one.merge_seconds;
  outcome_.seconds_head += one.head_seconds;
  if (one.head) set_head(std::shared_ptr<const Head>(std::move(one.head)), one.head_contributors, out);
  // Shared by every Send that carries it: FedCGS's Gram matrix alone is 13 MB at d = 1280.
  std::vector<std::shared_ptr<const Knowledge>> outgoing;
  for (auto& k : one.outgoing) outgoing.push_back(std::make_shared<const Knowledge>(std::move(k)));
  for (NodeId to : plan.forward_to)
    for (const auto& k : outgoing) send_knowledge(to, k, PlanMessage::Knowledge, 1, out);
  for (NodeId to : plan.feedback_to)
    for (const auto& k : outgoing) send_knowledge(to, k, PlanMessage::Knowledge, 1, out);
  if (one.complete) send_knowledge(*plan.complete_to, outgoing[*one.complete], PlanMessage::Complete, 1, out);
  if (outcome_.head) send_head(outcome_.head, outcome_.contributors, 1, out);
  Action done;
  done.kind = Action::Kind::PhaseDone;
  done.phase = 1;
  out.push_back(std::move(done));
  progress_.merged();
  stage_started_ = now;
  if (!outcome_.head) return;
  // Said once the phase is marked done: whoever reads it may rely on what a restart finds.
  Action said;
  said.kind = Action::Kind::Say;
  said.line = "phase 1 done: head fitted on " + to_string(outcome_.contributors);
  out.push_back(std::move(said));
}

bool Machine::waiting_for_refit(double now) {
  bool first = false;
  const bool waiting = hub_head_.awaits_refit(now, first);
  if (first)
    say("the head from " + who(*config_.plan.head_from) + " leaves out this node's data; waiting up to " +
        deadline_text(config_.plan.deadline_seconds) + " s for the hub to refit it with that data");
  return waiting;
}

void Machine::phase2(Actions& out) {
  const NodePlan& plan = config_.plan;
  if (const HeadOffer* offer = hub_head_.held()) {
    if (hub_head_.leaves_out_own_data())
      say("the head from " + who(*plan.head_from) + " covers " + to_string(offer->contributors) +
          ", not this node's own data (its hub gave up on it)");
    set_head(offer->head, offer->contributors, out);
  }
  if (plan.complete_from) take_complete(out);
  if (!plan.late_from.empty() || refit_pending_) refit(out);
  if (!outcome_.head) {
    // The hub never answered, or no complete knowledge came to a node whose first pass carried
    // masked sums (it fits no head in phase 1): a head on its own data is better than none.
    if (plan.head_from) say("no head from " + who(*plan.head_from) + "; fitting one on the local data only");
    else say("no complete knowledge came; fitting a head on the local data only");
    Refit r = refit_head(*config_.method, {}, *config_.local, config_.ctx);
    outcome_.seconds_head += r.seconds;
    set_head(std::shared_ptr<const Head>(std::move(r.head)), r.contributors, out);
  }
  Action done;
  done.kind = Action::Kind::PhaseDone;
  done.phase = 2;
  out.push_back(std::move(done));
  progress_.completed();
}

void Machine::take_complete(Actions& out) {
  const Piece* complete = complete_piece();
  if (!complete) return;
  // Partial when a node upstream gave up on someone: then what this node already holds (its
  // phase-1 inputs) still counts, combined with it, rather than being thrown away.
  const Contributors& covers = complete->knowledge->contributors;
  const bool partial = !includes(covers, outcome_.contributors);
  say("refitting the head on the complete knowledge " + to_string(covers) +
      (partial ? ", with the knowledge this node holds, since it covers less than " + to_string(outcome_.contributors)
               : std::string()));
  const std::vector<const Knowledge*> inputs = complete_inputs(*complete);
  const std::shared_ptr<const Knowledge> complete_knowledge = complete->knowledge;  // discard() may erase `complete`
  std::optional<Refit> r;
  try {
    r = refit_head(*config_.method, inputs, *config_.local, config_.ctx);
  } catch (const InputError& e) {
    discard(*complete, e.what());  // the head of phase 1 stays
  }
  if (!r) return;
  outcome_.seconds_head += r->seconds;
  set_head(std::shared_ptr<const Head>(std::move(r->head)), r->contributors, out);
  if (config_.plan.complete_to)
    send_knowledge(*config_.plan.complete_to, complete_knowledge, PlanMessage::Complete, 2, out);
}

void Machine::refit(Actions& out) {
  refit_pending_ = false;
  const Contributors covers = held_contributors();
  if (covers == outcome_.contributors) return;
  say("refitting the head with knowledge that came after phase 1: " + to_string(covers));
  Refit r = with_admission("refitting", [&](const std::vector<ReceivedPiece>& held) {
    return refit_head(*config_.method, knowledge_held(held), *config_.local, config_.ctx);
  });
  outcome_.seconds_head += r.seconds;
  std::shared_ptr<const Head> refitted(std::move(r.head));
  // Offered before it is saved: a node killed in between refits again on its restart (see
  // restart) and offers the same head twice, which a leaf takes once; the other order could
  // leave a saved head that no leaf is ever offered.
  send_head(refitted, r.contributors, kOfferPhase, out);
  set_head(refitted, r.contributors, out);
}

std::vector<const Knowledge*> Machine::complete_inputs(const Piece& complete) const {
  std::vector<const Knowledge*> inputs;
  if (!includes(complete.knowledge->contributors, outcome_.contributors))
    inputs = knowledge_in_order(pieces_);  // the Knowledge pieces (none folded: see folded_)
  inputs.push_back(complete.knowledge.get());
  return inputs;
}

const Machine::Piece* Machine::complete_piece() const {
  const Piece* complete = nullptr;
  for (const auto& p : pieces_)
    if (p.kind == PlanMessage::Complete) complete = &p;
  return complete;
}

std::shared_ptr<const ClassMeans> Machine::head_means() const {
  const auto& personalization = config_.personalization;
  if (!personalization || !outcome_.head) return nullptr;
  if (const HeadOffer* offer = hub_head_.held(); offer && outcome_.head == offer->head) return offer->class_means;
  // The inputs the head was fitted on: the complete knowledge (see take_complete), or the pieces
  // held and the folded sum.
  if (const Piece* complete = complete_piece()) return personalization->means_of(complete_inputs(*complete), config_.ctx);
  return personalization->means_of(knowledge_held(pieces_), config_.ctx);
}

std::shared_ptr<const Head> Machine::personal_head() const {
  if (!config_.personalization || !outcome_.head) return nullptr;
  const auto means = head_means();
  const std::string head_from = config_.plan.head_from ? who(*config_.plan.head_from) : "the hub";
  return config_.personalization->personal_head(*outcome_.head, means.get(), head_from, config_.ctx);
}

Contributors Machine::held_contributors() const {
  return select_for_combination(knowledge_held(pieces_), config_.local, config_.ctx, config_.method->name())
      .contributors;
}

bool Machine::held_knowledge_adds_to_head() const {
  const Contributors covers = held_contributors();
  return covers != outcome_.contributors && includes(covers, outcome_.contributors);
}

// --- actions ----------------------------------------------------------------------------------

void Machine::set_head(std::shared_ptr<const Head> head, const Contributors& contributors, Actions& out) {
  outcome_.head = std::move(head);
  outcome_.contributors = contributors;
  Action a;
  a.kind = Action::Kind::HeadChanged;
  a.head = outcome_.head;
  a.contributors = contributors;
  out.push_back(std::move(a));
}

void Machine::send_knowledge(NodeId to, std::shared_ptr<const Knowledge> k, PlanMessage kind, int phase,
                             Actions& out) const {
  Action a;
  a.kind = Action::Kind::Send;
  a.to = to;
  a.carries = kind;
  a.phase = phase;
  a.counted_bytes = k->payload_bytes(config_.half_precision);
  a.knowledge = std::move(k);
  out.push_back(std::move(a));
}

void Machine::send_head(const std::shared_ptr<const Head>& head, const Contributors& contributors, int phase,
                        Actions& out) {
  const auto& leaves = config_.plan.send_head_to;
  if (leaves.empty()) return;
  const int64_t bytes = head_bytes(*head);
  const auto means = head_means();
  for (NodeId to : leaves) {
    Action a;
    a.kind = Action::Kind::Send;
    a.to = to;
    a.carries = PlanMessage::Head;
    a.phase = phase;
    a.head = head;
    a.contributors = contributors;
    a.class_means = means;
    a.counted_bytes = bytes + (means ? static_cast<int64_t>(means->means.size() * sizeof(double)) : 0);
    out.push_back(std::move(a));
  }
  if (phase != kOfferPhase) return;
  Action said;
  said.kind = Action::Kind::Say;
  said.line = "offering the refitted head to " + to_string(Contributors(leaves.begin(), leaves.end()));
  out.push_back(std::move(said));
}

}  // namespace fednode
