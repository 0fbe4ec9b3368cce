// A capability that may hold a node's phase 1 back until it has done its part, composed by the
// machine (node/machine.h) through these hooks: secure aggregation's unmasking round
// (node/unmasking_round.h) is one. Wire-free, as the machine is: what a gate sends travels as
// its own CapabilityMessage.
#pragma once

#include "node/machine_action.h"

#include <functional>
#include <memory>
#include <string>

namespace fednode {

class MergeGate {
 public:
  virtual ~MergeGate() = default;

  struct Decision {
    enum class Kind { Go, Wait, GiveUp } kind = Kind::Go;
    std::shared_ptr<const Unmasking> unmasking;  // Go: how the method reads the masked pieces held
    std::string why;                             // GiveUp: why the gated pieces cannot be read
    Contributors unreadable;                     // GiveUp: whose pieces to discard (those held of them)
  };
  // Asked at every tick once phase 1's inputs are in or given up on, until it says Go or GiveUp.
  // `holds(m)`: the node holds m's Knowledge. `last_inbound`: when data last arrived.
  virtual Decision before_merge(const std::function<bool(NodeId)>& holds, double now, double last_inbound,
                                Actions& out) = 0;
  // Every tick, before the plan moves: what the gate owes whatever the plan's stage.
  virtual void on_tick(Actions& out) = 0;
  // A restart found the plan done: nothing the gate would still answer is needed any more.
  virtual void on_plan_done() = 0;
};

}  // namespace fednode
