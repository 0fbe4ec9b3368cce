// How the machine's actions become messages: a Send's type on the wire, and the message a
// capability sends (CapabilityMessage) as it travels. The drivers' side of the machine's
// wire-free actions (node/machine_action.h).
#pragma once

#include "node/machine_action.h"
#include "protocol/messages.h"

#include <optional>
#include <utility>

namespace fednode {

// A capability's message: its type and payload as protocol/messages.h has them.
struct WireMessage : CapabilityMessage {
  WireMessage(MessageType t, Payload p) : type(t), payload(std::move(p)) {}
  MessageType type;
  Payload payload;
};

// A capability message as the wire message it is; std::logic_error for any other kind.
const WireMessage& wire_message(const Action& send);
// The type a Send travels as: the capability message's own, or the plan's kind of message.
MessageType wire_type(const Action& send);
// The plan's name for a message type: Knowledge, Complete or Head; nothing for the others.
std::optional<PlanMessage> plan_message_of(MessageType t);

}  // namespace fednode
