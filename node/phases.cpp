#include "node/phases.h"

#include "node/step.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace fednode {

namespace {
bool input_order(const ReceivedPiece& a, const ReceivedPiece& b) {
  return a.from != b.from ? a.from < b.from : a.seq < b.seq;
}
}  // namespace

void sort_inputs(std::vector<ReceivedPiece>& pieces) { std::stable_sort(pieces.begin(), pieces.end(), input_order); }

void sort_inputs(std::vector<const ReceivedPiece*>& pieces) {
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const ReceivedPiece* a, const ReceivedPiece* b) { return input_order(*a, *b); });
}

bool forwards_knowledge(const NodePlan& plan) {
  const bool ring_last = plan.complete_to && !plan.complete_from;
  return !plan.forward_to.empty() || !plan.feedback_to.empty() || ring_last;
}

bool relays_pieces(const NodePlan& plan) { return forwards_knowledge(plan) && !plan.forward_merged; }

PhaseOne run_phase_one(const Method& method, const NodePlan& plan, const std::vector<ReceivedPiece>& received,
                       const KnowledgeSum* folded, const Features& local, const NodeContext& ctx) {
  std::vector<const ReceivedPiece*> order;
  for (const auto& p : received)
    if (p.kind == PlanMessage::Knowledge &&
        std::find(plan.wait_for.begin(), plan.wait_for.end(), p.from) != plan.wait_for.end())
      order.push_back(&p);
  sort_inputs(order);
  std::vector<const Knowledge*> pieces;
  pieces.reserve(order.size());
  for (const ReceivedPiece* p : order) pieces.push_back(p->knowledge.get());
  const KnowledgeList in(std::move(pieces), folded);

  const bool ring_last = plan.complete_to && !plan.complete_from;
  const bool forwards = forwards_knowledge(plan);
  PhaseOne r;
  if (!relays_pieces(plan)) {
    StepOutput out = run_step(method, in, local, ctx, forwards, plan.fits_head);
    r.merge_seconds = out.merge_seconds;
    r.head_seconds = out.head_seconds;
    if (out.outgoing) r.outgoing.push_back(std::move(*out.outgoing));
    r.head = std::move(out.head);
  } else {
    // A relay (docs/topologies.md, "Diamonds").
    if (folded) throw std::logic_error("a relay was given folded pieces");
    for (size_t i = 0; i < in.size(); ++i) {
      bool contained = false;
      for (size_t j = 0; j < in.size() && !contained; ++j) {
        const auto& a = in[i].contributors;
        const auto& b = in[j].contributors;
        contained = j != i && std::includes(b.begin(), b.end(), a.begin(), a.end()) && (a != b || j < i);
      }
      if (!contained) r.outgoing.push_back(in[i]);  // a copy: what a relay forwards is its own
    }
    const auto t0 = std::chrono::steady_clock::now();
    r.outgoing.push_back(released_summary(method, local, ctx));
    r.merge_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (plan.fits_head) {
      StepOutput out = run_step(method, in, local, ctx, false, true);
      r.head_seconds = out.head_seconds;
      r.head = std::move(out.head);
    }
  }
  if (ring_last && !r.outgoing.empty()) r.complete = 0;
  if (r.head) r.head_contributors = select_for_combination(in, &local, ctx, method.name()).contributors;
  return r;
}

Refit refit_head(const Method& method, const KnowledgeList& knowledge, const Features& local,
                 const NodeContext& ctx) {
  Refit r;
  StepOutput out = run_step(method, knowledge, local, ctx, false, true);
  r.head = std::move(out.head);
  r.seconds = out.head_seconds;
  r.contributors = select_for_combination(knowledge, &local, ctx, method.name()).contributors;
  return r;
}

}  // namespace fednode
