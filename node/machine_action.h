// What the node machine (node/machine.h) and the capabilities it composes ask their driver to
// carry out, in order.
#pragma once

#include "core/contributors.h"
#include "methods/method.h"
#include "protocol/messages.h"

#include <memory>
#include <string>
#include <vector>

namespace fednode {

// What a driver carries out for the machine, in order.
struct Action {
  enum class Kind {
    Send,         // seal `knowledge`, `head` or `payload` for `to` as `type`, queue it in `phase`
    HeadChanged,  // `head` on `contributors` is the node's head now: persist it, tell the app
    PhaseDone,    // everything phase `phase` sends is queued: mark the phase done
    Say,          // `line`, for people: what the actions before it did, once they are carried out
  };
  Kind kind = Kind::Send;
  NodeId to = 0;
  MessageType type = MessageType::Knowledge;  // Knowledge, Complete or Head
  int phase = 0;                              // 1, 2 or kOfferPhase (node/state_store.h)
  std::shared_ptr<const Knowledge> knowledge;
  std::shared_ptr<const Head> head;
  std::shared_ptr<const Payload> payload;     // secure aggregation's UnmaskRequest or UnmaskReply
  Contributors contributors;                  // of `head`
  std::shared_ptr<const ClassMeans> class_means;  // with `head`, when the run personalises
  int64_t counted_bytes = 0;                  // the payload as `fednode simulate` counts it
  std::string line;
};
using Actions = std::vector<Action>;

}  // namespace fednode
