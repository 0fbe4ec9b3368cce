// Secure aggregation's unmasking round in a star (docs/privacy.md, "Dropouts"): a capability the
// node machine composes. Once the leaves' masked pieces are in or given up on, the hub names the
// survivors, has each confirm the split to the others (consistency tags), asks each for the
// seeds that unmask their sum, and reads the sum with them; a leaf answers the one request it
// accepted. The round holds its own state; the node's admission (node/admission.h) hands it the
// unmasking messages, the machine lets it gate phase 1 (MergeGate) and carries out what it asks.
#pragma once

#include "core/log.h"
#include "node/merge_gate.h"
#include "node/secure_aggregation.h"
#include "topology/plan.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace fednode {

class UnmaskingRound : public MergeGate {
 public:
  // Null when the node takes no part in a round: no masks, or a mask group that needs none.
  static std::shared_ptr<UnmaskingRound> for_node(const std::optional<MaskPlan>& masks, MaskSecrets secrets,
                                                  const NodePlan& plan, NodeId self, Say say,
                                                  std::function<std::string(NodeId)> who);

  // Empty when an UnmaskRequest or UnmaskReply from `from` is one this node takes; else why not.
  std::string refusal(NodeId from, MessageType type, const Payload& p) const;
  // Why a node that takes part in no round refuses such a message.
  static std::string not_taken(MessageType type);
  // The hub: `from` was declared dropped, so its Knowledge would now be unmasked alone.
  bool declared_dropped(NodeId from) const;
  // An answer held already (a request is always answered again: the hub may have lost it).
  bool is_repeat(NodeId from, MessageType type, const Payload& p) const;
  // A request or answer that passed refusal(). `fresh`: it just arrived, not replayed on a restart.
  void accept(NodeId from, MessageType type, Payload payload, bool fresh, Actions& out);
  // The head is in (a restart found it): a replayed request no longer needs an answer.
  void on_plan_done() override { answer_due_ = false; }
  // A leaf: answers a request replayed on a restart.
  void on_tick(Actions& out) override;
  // The hub's gate on phase 1: Go with what reads the survivors' sum, once every survivor
  // answered; GiveUp, naming the mask group, when the sum cannot be read.
  Decision before_merge(const std::function<bool(NodeId)>& holds, double now, double last_inbound,
                        Actions& out) override;

 private:
  UnmaskingRound(MaskPlan masks, MaskSecrets secrets, NodeId self, std::optional<NodeId> hub, double deadline, Say say,
                 std::function<std::string(NodeId)> who);
  bool is_hub() const { return !masks_.member; }
  // The hub's split of its group into survivors (whose pieces it holds) and dropped; why not, when
  // too few survive for the sum to be read without revealing one leaf.
  std::string decide(const std::function<bool(NodeId)>& holds);
  void answer(Actions& out);

  MaskPlan masks_;
  MaskSecrets secrets_;
  NodeId self_;
  std::optional<NodeId> hub_;   // a leaf's hub
  double deadline_;             // each step of the round waits at most the plan's deadline
  Say say_;
  std::function<std::string(NodeId)> who_;

  // The hub's decision, or the first request a leaf answered (a leaf answers no other: two answers
  // for different survivors could give one leaf's self seed and every pair seed with it away).
  std::optional<UnmaskRequest> request_;
  std::optional<UnmaskRequest> tagged_request_;  // a leaf: the second request, with tags
  std::map<NodeId, UnmaskReply> tags_;           // the hub's: consistency answers, by survivor
  std::map<NodeId, UnmaskReply> replies_;        // the hub's: seeds, by survivor
  bool asked_ = false;         // the hub sent its first requests in this life of the node
  bool tagged_sent_ = false;   // and its second, with the tags
  bool done_ = false;          // the hub read the sum, or gave up
  double asked_at_ = 0, tagged_at_ = 0;
  bool answer_due_ = false;    // a leaf: a request replayed on a restart, answered at the next tick
};

}  // namespace fednode
