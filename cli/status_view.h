// What `fednode status` and `fednode launch`'s live table show of every node of a topology: read
// from each node's state directory (status.json while it runs, result.json once it ended), on
// this machine (docs/cli.md, "fednode status").
#pragma once

#include "topology/topology.h"

#include <optional>
#include <string>
#include <vector>

namespace fednode::cli {

struct NodeView {
  NodeId id = 0;
  std::string label;       // name, or id
  // "not started", "running", "not responding" (alive, status.json older than 10 s), "stopped"
  // (its process is gone without a result), or the result's status: "finished", "incomplete", ...
  std::string state;
  std::string stage;       // "phase 1", "phase 2" or "plan done"; "" once ended
  std::vector<long> awaiting;
  std::optional<double> deadline_in_seconds;  // counted down to the time of reading
  std::vector<std::string> accepted;          // "knowledge from 0", ...
  std::vector<long> unacknowledged;
  std::vector<long> contributors, missing, refused_by;  // from result.json
  std::optional<double> accuracy;
  long long bytes_sent = 0, bytes_received = 0;
  struct Link {
    long peer = 0;
    long long sent = 0, received = 0;
  };
  std::vector<Link> links;  // bytes per peer, as the node counted them (node/link_bytes.h)
  long pid = 0;
  std::string last_line;
  std::string problem;  // a state file that could not be read, naming it
};

std::vector<NodeView> read_node_views(const Topology& topology);
// [0, 1, 2, 3, 5] -> "0-3,5" (a star of 32 nodes still fits a table); "-" for none.
std::string compact_ids(const std::vector<long>& ids);
bool every_node_ended(const std::vector<NodeView>& views);
std::string status_table(const std::vector<NodeView>& views);
// One line per link a node used: "n0 -> n1   sent   received" (empty when no node has any).
std::string links_table(const Topology& topology, const std::vector<NodeView>& views);
std::string status_json(const std::vector<NodeView>& views);

}  // namespace fednode::cli
