#include "node/running_sum.h"

#include "node/phases.h"

#include <algorithm>
#include <map>

namespace fednode {

RunningSum::RunningSum(const NodePlan& plan, const Method& method, const NodeContext& ctx) {
  if (relays_pieces(plan) || plan.complete_from) return;
  std::map<NodeId, int> routes;  // per contributor, the senders that can bring its data here
  for (const auto& [sender, possible] : plan.sources)
    for (NodeId c : possible) ++routes[c];
  for (NodeId from : plan.wait_for) {
    const auto it = plan.sources.find(from);
    if (it != plan.sources.end() && it->second == Contributors{from} && routes[from] == 1) senders_.push_back(from);
  }
  std::sort(senders_.begin(), senders_.end());
  // Only where something may be folded: a chain's later nodes and a star's leaves hold no sum.
  // A node that sends nothing on folds for its head alone, which more methods can (a FedPFT hub).
  if (!senders_.empty()) sum_ = forwards_knowledge(plan) ? method.start_sum(ctx) : method.start_head_sum(ctx);
  if (!sum_) senders_.clear();  // knowledge that does not add is held as it is
}

bool RunningSum::fold(NodeId from, PlanMessage kind, const Knowledge& k, const std::string& where) {
  if (!sum_ || kind != PlanMessage::Knowledge || !std::binary_search(senders_.begin(), senders_.end(), from))
    return false;
  try {
    sum_->add(k, where);
  } catch (const InputError&) {
    return false;
  }
  folded_.push_back(Folded{from, k.contributors});
  return true;
}

bool RunningSum::holds(NodeId from, const Contributors& contributors) const {
  for (const auto& f : folded_)
    if (f.from == from && f.contributors == contributors) return true;
  return false;
}

void RunningSum::drop_all(const Method& method, const NodeContext& ctx) {
  if (sum_) sum_ = method.start_head_sum(ctx);
  folded_.clear();
}

void RunningSum::release() {
  sum_.reset();
  std::vector<Folded>().swap(folded_);
}

}  // namespace fednode
