// What a node takes from whom, checked before a message is stored and acknowledged (docs/protocol.md
// 5.5), and whom it goes to once taken: a hello of the node's feature space, the messages its plan
// expects from that sender, a head or knowledge of its backbone and shape whose contributors can
// reach it, pieces its method accepts; secure aggregation's messages as its round
// (node/unmasking_round.h) takes them. The machine (node/machine.h), wire-free, merges what passed.
#pragma once

#include "node/machine.h"
#include "protocol/messages.h"

#include <memory>
#include <string>

namespace fednode {

class UnmaskingRound;

class Admission {
 public:
  // `unmasking`: the node's round, null where it takes part in none. Both outlive the admission.
  Admission(Machine& machine, UnmaskingRound* unmasking) : machine_(machine), unmasking_(unmasking) {}

  // Empty when the node takes `p` as `type` from `from`; otherwise why not. Throws InputError
  // where the method refuses the piece: one that would make merging fail is refused now.
  std::string refusal(NodeId from, MessageType type, const Payload& p) const;
  // Whether a refused `p` was made for another feature space than the node's (method, backbone,
  // dimension or class count): answered as `incompatible`, the rest as `rejected`.
  bool incompatible(MessageType type, const Payload& p) const;
  // A second copy of something held already (the sender redid a phase after a crash and sealed it
  // anew): to acknowledge, not to store or use again.
  bool is_repeat(NodeId from, MessageType type, const Payload& p) const;
  // A Knowledge, Complete, Head or unmasking message that passed refusal(), handed to the machine
  // or the capability it is for. `fresh`: it just arrived (not replayed on a restart).
  Actions accept(NodeId from, uint64_t seq, MessageType type, Payload payload, bool fresh, double now);

  Machine& machine() { return machine_; }
  const Machine& machine() const { return machine_; }

 private:
  Machine& machine_;
  UnmaskingRound* unmasking_;
};

}  // namespace fednode
