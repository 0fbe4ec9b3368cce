// What a node computes at each point of its plan (topology/plan.h), independent of how the
// knowledge reached it: the networked node (node/node.h) and the in-process simulator
// (node/simulator.h) both call these, so a federation gives the same result either way.
#pragma once

#include "methods/method.h"
#include "topology/plan.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

// A piece of knowledge as a node received it. Inputs are used in the order (from, seq), never
// in arrival order, which differs from run to run.
struct ReceivedPiece {
  NodeId from = 0;
  uint64_t seq = 0;  // the sender's order (message id on the network)
  PlanMessage kind = PlanMessage::Knowledge;
  // Shared, never copied: a piece is held once however many lists of inputs name it (a FedCGS
  // piece is a d x d matrix, 5 MB at d = 784, and a hub holds one per leaf).
  std::shared_ptr<const Knowledge> knowledge;
};
void sort_inputs(std::vector<ReceivedPiece>& pieces);
void sort_inputs(std::vector<const ReceivedPiece*>& pieces);

// Every Knowledge piece (not Complete) in that order: what a refit after phase 1 combines.
// `Piece` is ReceivedPiece or derived from it; the pointers are to the pieces' own knowledge.
template <class Piece>
std::vector<const Knowledge*> knowledge_in_order(const std::vector<Piece>& pieces) {
  std::vector<const ReceivedPiece*> order;
  for (const ReceivedPiece& p : pieces)
    if (p.kind == PlanMessage::Knowledge) order.push_back(&p);
  sort_inputs(order);
  std::vector<const Knowledge*> knowledge;
  knowledge.reserve(order.size());
  for (const ReceivedPiece* p : order) knowledge.push_back(p->knowledge.get());
  return knowledge;
}

struct PhaseOne {
  std::vector<Knowledge> outgoing;  // to every forward_to and feedback_to node, in this order
  std::optional<size_t> complete;   // index into outgoing: the ring's last node sends it on as complete
  std::unique_ptr<Head> head;       // when the plan fits a head
  Contributors head_contributors;
  double merge_seconds = 0, head_seconds = 0;
};

// A relay forwards the pieces it received as they are (docs/topologies.md, "Diamonds"), so it
// must hold them apart: it may not fold them into a sum.
bool relays_pieces(const NodePlan& plan);
// Whether phase 1 sends knowledge on (merged, or relayed); if not, what the node receives serves
// its head only.
bool forwards_knowledge(const NodePlan& plan);

// Phase 1 (docs/topologies.md): merge the wait_for senders' knowledge with the local data, fit
// the head, and what to forward — one merged piece, or, for a relay, every piece unchanged
// (except those contained in another) plus the node's own summary, last. `folded`, when not null,
// holds wait_for senders' pieces folded as they arrived (never at a relay).
PhaseOne run_phase_one(const Method& method, const NodePlan& plan, const std::vector<ReceivedPiece>& received,
                       const KnowledgeSum* folded, const Features& local, const NodeContext& ctx);

struct Refit {
  std::unique_ptr<Head> head;
  Contributors contributors;
  double seconds = 0;
};
// A head on everything `knowledge` and the local data hold (ring's complete knowledge, graph
// feedback, late arrivals), by the contributor rules.
Refit refit_head(const Method& method, const KnowledgeList& knowledge, const Features& local,
                 const NodeContext& ctx);

// Runs `work` on `pieces`. Pieces that each passed Method::validate can still fail together (a
// sum that overflows, a head that cannot be fitted): when `work` throws InputError, `failed` is
// told why, and the pieces are admitted one at a time in input order, each one that makes `work`
// fail going to `discarded` instead, so that one sender's piece does not cost the others'. That
// path costs a run of `work` per piece. Returns `work` on what was admitted; throws if `work`
// fails with no piece at all (the local data alone).
template <class Work, class Failed, class Discarded>
auto run_admitting(std::vector<ReceivedPiece> pieces, Work&& work, Failed&& failed, Discarded&& discarded) {
  using Out = decltype(work(pieces));
  try {
    return work(pieces);
  } catch (const InputError& e) {
    if (pieces.empty()) throw;
    failed(std::string(e.what()));
  }
  sort_inputs(pieces);
  std::vector<ReceivedPiece> admitted;
  std::optional<Out> last;
  for (auto& p : pieces) {
    admitted.push_back(p);
    try {
      last.emplace(work(admitted));
    } catch (const InputError& e) {
      admitted.pop_back();
      discarded(p, std::string(e.what()));
    }
  }
  if (last) return std::move(*last);
  return work(admitted);
}

}  // namespace fednode
