// What decides a node's result, written into its state directory when the run starts: a
// restart continues the run only under the same record, so that a state directory reused with
// other data, options or topology is refused instead of silently returning the old result.
#pragma once

#include "node/node.h"
#include "node/state_store.h"

#include <optional>
#include <string>

namespace fednode {

// JSON, one setting per line: the node, its method and options, the backbone, the shape and a
// SHA-256 of its training features, and the federation's mode, seed and edges. Addresses,
// deadlines, test features and thread counts are left out: they may change between restarts.
std::string configuration_record(const NodeConfig& config);

// The record as the state directory keeps it: followed by a line with its SHA-256, so that a
// damaged file is told apart from another configuration.
std::string sealed_configuration(const std::string& record);
// The record, or nothing when the checksum line is missing or does not match.
std::optional<std::string> unsealed_configuration(const std::string& file_text);

// Empty when the records are the same; otherwise the first line that differs, as
// `"key": old` -> `"key": new`, in printable ASCII and at most a few hundred characters.
std::string first_difference(const std::string& was, const std::string& now);

// A state directory continues the run it was started for, and only under the configuration it
// was started with: other data or options would otherwise get the old result back. Writes the
// record at the first start; throws InputError naming the first difference otherwise.
void check_configuration(StateStore& store, const NodeConfig& config);

}  // namespace fednode
