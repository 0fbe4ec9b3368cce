// Additive knowledge (Method::start_sum, FedCGS's statistics; Method::start_head_sum, a FedPFT hub's
// samples) folded piece by piece into one running sum as it arrives, so that a star's hub holds one
// sum rather than a piece per leaf (128 leaves' Gram matrices were 640 MB). A sender's piece is
// folded only when nothing could ever want it apart: the plan waits for the sender, the sender can
// send only its own data, and nobody else can bring that data here; and the node neither relays
// pieces nor takes a ring's complete knowledge (which must be able to replace the pieces).
#pragma once

#include "methods/method.h"
#include "topology/plan.h"

#include <memory>
#include <string>
#include <vector>

namespace fednode {

class RunningSum {
 public:
  // Folds nothing where the plan or the method allows no folding.
  RunningSum(const NodePlan& plan, const Method& method, const NodeContext& ctx);

  // Folds `k` from `from` if it may be folded; false, nothing changed, if it is to be held as it is
  // (also when it cannot be added: merging then finds the same trouble and discards it, naming it).
  bool fold(NodeId from, PlanMessage kind, const Knowledge& k, const std::string& where);
  // Whether a piece from `from` on these contributors is in the sum (a second copy is a repeat).
  bool holds(NodeId from, const Contributors& contributors) const;
  const KnowledgeSum* sum() const { return sum_.get(); }
  size_t count() const { return folded_.size(); }
  // Drops what was folded (it cannot be read: secure aggregation's round failed); what comes after
  // is summed for the head alone.
  void drop_all(const Method& method, const NodeContext& ctx);
  // Frees the sum: nothing more will be delivered.
  void release();

 private:
  struct Folded {
    NodeId from = 0;
    Contributors contributors;
  };
  std::unique_ptr<KnowledgeSum> sum_;
  std::vector<NodeId> senders_;  // sorted: whose pieces may be folded
  std::vector<Folded> folded_;
};

}  // namespace fednode
