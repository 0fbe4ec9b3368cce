// A networked node's result, from what its machine has to show (node/machine.h) and how it
// finished: the status rules of docs/node.md, the one-line summary, and the JSON (node/node.h).
#pragma once

#include "node/machine.h"
#include "node/node.h"

#include <optional>
#include <string>
#include <vector>

namespace fednode {

// Fills `result`'s plan fields, status, head and accuracy. `never_delivered`: senders given up
// on at a deadline that never delivered, sorted (Machine::never_delivered). `result`'s
// refused_by and expected_contributors must be set already.
void score_result(NodeResult& result, const MachineOutcome& outcome, const std::vector<NodeId>& never_delivered,
                  NodeStatus finish_status, const std::optional<Features>& test);

// `ids` without repeats, each where it first appears.
std::vector<NodeId> distinct(const std::vector<NodeId>& ids);

// "finished: accuracy 0.8170 with contributors 0-3", and whatever made the node incomplete,
// named where the reader looks first.
std::string result_summary(const NodeResult& result);

}  // namespace fednode
