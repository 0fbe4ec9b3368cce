// The edges of a topology as index-based adjacency lists, and the graph algorithms that
// validation and planning share. Internal to topology/.
#pragma once

#include "topology/topology.h"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace fednode::topo {

// A set of node indices, one bit each; N is at most kMaxTopologyNodes so these stay small.
class Bits {
 public:
  explicit Bits(size_t n = 0) : w_((n + 63) / 64, 0) {}
  void set(size_t i) { w_[i / 64] |= uint64_t{1} << (i % 64); }
  bool test(size_t i) const { return (w_[i / 64] >> (i % 64)) & 1; }
  void unite(const Bits& o) {
    for (size_t k = 0; k < w_.size(); ++k) w_[k] |= o.w_[k];
  }
  bool intersects(const Bits& o) const {
    for (size_t k = 0; k < w_.size(); ++k)
      if (w_[k] & o.w_[k]) return true;
    return false;
  }

 private:
  std::vector<uint64_t> w_;
};

struct Digraph {
  std::vector<NodeId> ids;                      // index -> id, ascending
  std::map<NodeId, size_t> index;               // id -> index
  std::vector<std::vector<size_t>> out, in;     // ordinary edges, neighbours in ascending id order
  std::vector<std::vector<size_t>> fb_out, fb_in;  // feedback edges (graph mode)
  std::map<std::pair<size_t, size_t>, int> line;   // edge -> line in the file (0 when unknown)

  size_t size() const { return ids.size(); }
};

// Assumes every edge's endpoints exist (validation checks that first).
Digraph make_digraph(const Topology& topology);

// A cycle of ordinary edges as the nodes along it (the first not repeated at the end), starting
// at its smallest index so that messages are stable; empty when there is none.
std::vector<size_t> find_cycle(const Digraph& g);

// Kahn's order over ordinary edges, the smallest ready id first. Nodes on or after a cycle are
// left out; `stuck` (if given) receives them in ascending order.
std::vector<size_t> topological_order(const Digraph& g, std::vector<size_t>* stuck = nullptr);

// For each node, itself and every node with an ordinary path to it. Needs an acyclic graph.
std::vector<Bits> closed_ancestors(const Digraph& g, const std::vector<size_t>& order);

// Weakly connected components over all edges (ordinary and feedback), each in ascending order,
// the components ordered by their smallest index.
std::vector<std::vector<size_t>> weak_components(const Digraph& g);

}  // namespace fednode::topo
