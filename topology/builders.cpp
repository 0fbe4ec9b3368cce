#include "topology/builders.h"

#include "core/rng.h"
#include "topology/address.h"

#include <set>

namespace fednode {
namespace {

std::vector<std::pair<NodeId, NodeId>> graph_edges(int n, uint64_t seed) {
  std::vector<std::pair<NodeId, NodeId>> edges;
  if (n == 4) return {{0, 1}, {0, 2}, {1, 3}, {2, 3}};
  Rng rng = Rng::stream(seed, Purpose::TopologyBuild, static_cast<uint64_t>(n));
  std::set<std::pair<NodeId, NodeId>> have;
  // A parent for every node keeps the graph connected; edges only go from lower to higher
  // ids, so it is acyclic.
  for (int b = 1; b < n; ++b) {
    const auto a = static_cast<NodeId>(rng.below(static_cast<uint64_t>(b)));
    have.insert({a, static_cast<NodeId>(b)});
  }
  // About as many extra edges again, so that some nodes merge several branches.
  const double p = n > 2 ? 2.0 / n : 0.0;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      if (!have.count({NodeId(a), NodeId(b)}) && rng.uniform() < p) have.insert({NodeId(a), NodeId(b)});
  edges.assign(have.begin(), have.end());
  return edges;
}

}  // namespace

PublicKeyProvider keys_from_map(std::map<NodeId, std::string> keys) {
  return [keys = std::move(keys)](const TopologyNode& node, const std::string&) {
    const auto it = keys.find(node.id);
    return it == keys.end() ? std::string() : it->second;
  };
}

Topology build_topology(const TopologyBuildOptions& o) {
  const std::string mode = to_string(o.mode);
  const size_t most = o.mode == TopologyMode::Graph ? kMaxGraphNodes : kMaxTopologyNodes;
  if (o.nodes < 1 || static_cast<size_t>(o.nodes) > most)
    throw InputError("a " + mode + " topology needs 1 to " + std::to_string(most) + " nodes, got " +
                     std::to_string(o.nodes));
  if ((o.mode == TopologyMode::Ring || o.mode == TopologyMode::Star) && o.nodes < 2)
    throw InputError("a " + mode + " topology needs at least 2 nodes, got " + std::to_string(o.nodes));
  if (o.base_port < 1 || o.base_port + o.nodes - 1 > 65535)
    throw InputError("ports " + std::to_string(o.base_port) + " to " + std::to_string(o.base_port + o.nodes - 1) +
                     " do not fit in 1..65535; choose another base port");
  if (o.host.empty()) throw InputError("the host is empty");

  Topology t;
  t.source = "<built " + mode + " topology>";
  t.base_dir = o.base_dir.empty() ? "." : o.base_dir;
  auto& f = t.federation;
  f.mode = o.mode;
  f.method = o.method;
  if (!o.run.empty()) f.run = o.run;
  f.seed = o.seed;
  f.deadline_seconds = o.deadline_seconds;
  f.ack_deadline_seconds = o.ack_deadline_seconds;
  f.silence_seconds = o.silence_seconds;
  f.receive_window = o.receive_window;
  f.hop_encryption = o.hop_encryption;
  f.options = o.options;
  f.data = o.data;
  if (o.mode == TopologyMode::Star) f.hub = 0;
  if (o.mode == TopologyMode::Ring) f.start = 0;

  const bool ipv6 = o.host.find(':') != std::string::npos && o.host.front() != '[';
  const std::string host = ipv6 ? "[" + o.host + "]" : o.host;
  // Checked here once, so that the message names the host rather than the first node's address.
  std::string why;
  if (!topo::parse_endpoint("tcp://" + host + ":" + std::to_string(o.base_port), false, &why))
    throw InputError("host '" + o.host + "': " + why);
  for (int i = 0; i < o.nodes; ++i) {
    TopologyNode n;
    n.id = static_cast<NodeId>(i);
    n.name = "n" + std::to_string(i);
    if (o.addresses) n.address = "tcp://" + host + ":" + std::to_string(o.base_port + i);
    if (!o.key_root.empty()) n.key_dir = o.key_root + "/" + n.name;
    n.state_dir = o.state_root + "/" + n.name;
    if (o.public_key) n.public_key_text = o.public_key(n, t.resolve(n.key_dir));
    t.nodes.push_back(std::move(n));
  }

  const int N = o.nodes;
  auto edge = [&](int a, int b) {
    TopologyEdge e;
    e.from = NodeId(a);
    e.to = NodeId(b);
    t.edges.push_back(std::move(e));
  };
  switch (o.mode) {
    case TopologyMode::Linear:
      for (int i = 0; i + 1 < N; ++i) edge(i, i + 1);
      break;
    case TopologyMode::Ring:
      for (int i = 0; i < N; ++i) edge(i, (i + 1) % N);
      break;
    case TopologyMode::Star:
      for (int i = 1; i < N; ++i) edge(i, 0);
      break;
    case TopologyMode::Graph:
      for (const auto& [a, b] : graph_edges(N, o.seed)) edge(static_cast<int>(a), static_cast<int>(b));
      break;
  }

  LoadOptions load;
  load.require_keys = false;
  derive_public_keys(t, load);
  validate_topology(t, false);
  return t;
}

}  // namespace fednode
