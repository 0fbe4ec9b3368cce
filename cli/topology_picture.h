// What a drawing of a topology shows, whoever lays it out (Graphviz through topology_dot.h, or
// fednode itself through topology_svg.h): nodes with their labels and state, and the edges
// knowledge and heads travel along.
#pragma once

#include "cli/status_view.h"
#include "topology/topology.h"

#include <optional>
#include <string>
#include <vector>

namespace fednode::cli {

// The four states a picture tells apart: "done" (finished), "running" (also not responding),
// "failed" (stopped, incomplete or any other end short of finished), "not started"; "" when the
// picture shows no state at all.
std::string state_class(const std::string& node_state);
// The fill colour of a node in that state (white for no state).
std::string state_colour(const std::string& state_class);

struct PictureNode {
  NodeId id = 0;
  std::vector<std::string> lines;  // the label: the first line names the node
  std::string state;               // NodeView::state as shown ("finished", ...), "" when unknown
  std::string state_class;         // see state_class()
};

struct PictureEdge {
  NodeId from = 0, to = 0;
  bool implied = false;  // not listed in the file: a star hub's head back to a leaf
  bool feedback = false; // graph mode: closes a cycle, merged in phase 2
  std::string label;     // "head", "feedback", "via r1", or "", then the bytes sent along it when known
  std::string via;       // the relay that carries it (both ends have reachable = false), or ""
  long long bytes_sent = -1;  // by `from` to `to`, from its state directory; -1 unknown
};

struct TopologyPicture {
  std::string title;
  TopologyMode mode = TopologyMode::Linear;
  std::optional<NodeId> hub, start;
  std::vector<PictureNode> nodes;  // ascending ids
  std::vector<PictureEdge> edges;  // the file's order, then the implied ones
  std::vector<std::pair<std::string, std::string>> relays;  // name, address: the file's [[relay]]s
  bool has_state = false;          // whether any node's state directory exists
};

// Nodes labelled with name, id and address (or "accepts no connections"); the file's edges, and
// in a star the hub's head going back to every leaf (implied by the mode, so the file does not
// list it); an edge between two unreachable nodes names the relay that carries it.
TopologyPicture picture_of(const Topology& topology, const std::string& title);
// "376 B", "32.7 kB", "2.53 MB": an edge's label.
std::string bytes_text(long long bytes);
// Colours nodes by state, adds their bytes to the labels and to each edge what its first node
// sent along it, when `views` (status_view.h) show
// that at least one node's state directory exists; otherwise leaves the picture as it is.
void add_states(TopologyPicture& picture, const Topology& topology, const std::vector<NodeView>& views);

}  // namespace fednode::cli
