// What a node takes from whom, checked before a message is stored and acknowledged (docs/protocol.md
// 5.5): a hello of the node's feature space, the messages its plan expects from that sender, a
// head or knowledge of its backbone and shape whose contributors can reach it, pieces its method
// accepts, and secure aggregation's messages as its round (node/unmasking_round.h) takes them.
// Kept apart from the machine, which merges what passed.
#pragma once

#include "node/machine.h"

#include <optional>
#include <string>

namespace fednode {

class UnmaskingRound;

// The plan's name for a message type: Knowledge, Complete or Head; nothing for the others.
std::optional<PlanMessage> plan_message_of(MessageType t);
// Whether `p` was made for another feature space than the node's (method, backbone, dimension or
// class count): refused as `incompatible`, the rest as `rejected`.
bool incompatible_message(const MachineConfig& config, MessageType type, const Payload& p);
// Empty when the node takes `p` as `type` from `from`; otherwise why not. `unmasking`: the node's
// round, null where it takes part in none. Throws InputError where the method refuses the piece.
std::string refusal_of(const MachineConfig& config, const UnmaskingRound* unmasking, NodeId from, MessageType type,
                       const Payload& p);

}  // namespace fednode
