// What the node machine (node/machine.h) and the capabilities it composes ask their driver to
// carry out, in order. Wire-free: the driver turns a Send into a message (node/wire_message.h).
#pragma once

#include "core/contributors.h"
#include "methods/method.h"
#include "topology/plan.h"

#include <memory>
#include <string>
#include <vector>

namespace fednode {

// A frame the peer may no longer be there to take (a star hub's head refitted on knowledge that
// came late: a leaf that finished already has closed). Node and Outbox give it up after a while
// instead of holding the node back or counting the peer as unacknowledged.
constexpr int kOfferPhase = 3;

// A message of a capability the machine composes (secure aggregation's unmasking round): the
// machine hands it on in order without reading it. Only the capability that made it and the
// drivers know what it is (node/wire_message.h).
class CapabilityMessage {
 public:
  virtual ~CapabilityMessage() = default;
};

// What a driver carries out for the machine, in order.
struct Action {
  enum class Kind {
    Send,         // `message`, else `knowledge` or `head` as `carries`, for `to`, queued in `phase`
    HeadChanged,  // `head` on `contributors` is the node's head now: persist it, tell the app
    PhaseDone,    // everything phase `phase` sends is queued: mark the phase done
    Say,          // `line`, for people: what the actions before it did, once they are carried out
  };
  Kind kind = Kind::Send;
  NodeId to = 0;
  PlanMessage carries = PlanMessage::Knowledge;  // Knowledge or Complete with `knowledge`; Head with `head`
  int phase = 0;                                 // 1, 2 or kOfferPhase
  std::shared_ptr<const Knowledge> knowledge;
  std::shared_ptr<const Head> head;
  std::shared_ptr<const CapabilityMessage> message;
  Contributors contributors;                      // of `head`
  std::shared_ptr<const ClassMeans> class_means;  // with `head`, when the run personalises
  int64_t counted_bytes = 0;                      // the payload as `fednode simulate` counts it
  std::string line;
};
using Actions = std::vector<Action>;

}  // namespace fednode
