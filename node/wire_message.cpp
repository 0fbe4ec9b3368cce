#include "node/wire_message.h"

#include <stdexcept>

namespace fednode {

const WireMessage& wire_message(const Action& send) {
  const auto* m = dynamic_cast<const WireMessage*>(send.message.get());
  if (!m) throw std::logic_error("a Send carries a capability message that is not a wire message");
  return *m;
}

MessageType wire_type(const Action& send) {
  if (send.message) return wire_message(send).type;
  switch (send.carries) {
    case PlanMessage::Knowledge: return MessageType::Knowledge;
    case PlanMessage::Complete: return MessageType::Complete;
    case PlanMessage::Head: return MessageType::Head;
  }
  throw std::logic_error("a Send of no known kind");
}

std::optional<PlanMessage> plan_message_of(MessageType t) {
  switch (t) {
    case MessageType::Knowledge: return PlanMessage::Knowledge;
    case MessageType::Complete: return PlanMessage::Complete;
    case MessageType::Head: return PlanMessage::Head;
    default: return std::nullopt;
  }
}

}  // namespace fednode
