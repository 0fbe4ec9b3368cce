// validate_topology: every rule of docs/topologies.md "Validation", first problem thrown.
#include "topology/address.h"
#include "topology/graph.h"
#include "topology/topology.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>

namespace fednode {
namespace {

// Every digit of a double, so that a value just past a bound does not print as the bound.
std::string exact_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

using topo::Digraph;

class Checker {
 public:
  explicit Checker(const Topology& t) : t_(t) {}

  [[noreturn]] void fail(int line, const std::string& message) const {
    throw InputError(t_.where(line) + ": " + message);
  }
  std::string name(size_t index) const { return t_.describe(g_.ids[index]); }
  std::string id(size_t index) const { return std::to_string(g_.ids[index]); }
  int edge_line(size_t a, size_t b) const {
    const auto it = g_.line.find({a, b});
    return it == g_.line.end() ? 0 : it->second;
  }
  std::string path(const std::vector<size_t>& cycle) const {
    std::string s;
    for (size_t v : cycle) s += id(v) + " -> ";
    return s + id(cycle.front());
  }
  std::string lines(const std::vector<size_t>& cycle) const {
    std::string s;
    for (size_t k = 0; k < cycle.size(); ++k) {
      const int l = edge_line(cycle[k], cycle[(k + 1) % cycle.size()]);
      if (l > 0) s += (s.empty() ? "" : ", ") + std::to_string(l);
    }
    return s.empty() ? "" : " (lines " + s + ")";
  }
  std::string id_list(const std::vector<size_t>& v, size_t limit = 12) const {
    std::string s;
    for (size_t k = 0; k < v.size() && k < limit; ++k) s += (k ? ", " : "") + id(v[k]);
    if (v.size() > limit) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
  }

  void run(bool require_keys) {
    federation();
    nodes(require_keys);
    relays(require_keys);
    edges();
    g_ = topo::make_digraph(t_);
    switch (t_.federation.mode) {
      case TopologyMode::Linear: linear(); break;
      case TopologyMode::Ring: ring(); break;
      case TopologyMode::Star: star(); break;
      case TopologyMode::Graph: graph(); break;
    }
  }

 private:
  static bool option_key_ok(const std::string& k) {
    if (k.empty() || k.size() > 64 || !std::isalnum(static_cast<unsigned char>(k[0]))) return false;
    for (char c : k)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) return false;
    return true;
  }

  void option_keys(const OptionMap& m, int line, const std::string& what) const {
    for (const auto& [k, v] : m) {
      if (!option_key_ok(k))
        fail(line, what + ": option name '" + k + "' must be letters, digits, '-' or '_' (as on the command line, without --)");
      if (k == "method")
        fail(line, what + ": 'method' is set once for the whole federation, as [federation] method");
      if (v.size() > 4096) fail(line, what + ": option '" + k + "' is longer than 4096 characters");
    }
  }

  void federation() const {
    const auto& f = t_.federation;
    if (t_.nodes.empty()) fail(0, "the topology lists no nodes (add [[node]] sections)");
    if (t_.nodes.size() > kMaxTopologyNodes)
      fail(0, "at most " + std::to_string(kMaxTopologyNodes) + " nodes, the topology has " + std::to_string(t_.nodes.size()));
    if (f.mode == TopologyMode::Graph && t_.nodes.size() > kMaxGraphNodes)
      fail(0, "graph mode: at most " + std::to_string(kMaxGraphNodes) + " nodes, the topology has " +
                  std::to_string(t_.nodes.size()));
    if (f.method.empty()) fail(f.line_of("method"), "[federation] method is empty");
    for (char c : f.method)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
        fail(f.line_of("method"), "[federation] method '" + f.method + "' is not a method name");
    if (f.run) {
      const std::string problem = run_name_problem(*f.run);
      if (!problem.empty()) fail(f.line_of("run"), "[federation] run " + problem);
    }
    if (f.seed > static_cast<uint64_t>(INT64_MAX))
      fail(f.line_of("seed"), "[federation] seed must be at most 2^63 - 1 (TOML integers are signed)");
    if (!(f.deadline_seconds > 0) || f.deadline_seconds > kMaxDeadlineSeconds)
      fail(f.line_of("deadline_seconds"),
           "[federation] deadline_seconds must be in (0, " + std::to_string(int64_t(kMaxDeadlineSeconds)) +
                       "], got " + exact_text(f.deadline_seconds));
    if (!(f.ack_deadline_seconds > 0) || f.ack_deadline_seconds > kMaxDeadlineSeconds)
      fail(f.line_of("ack_deadline_seconds"),
           "[federation] ack_deadline_seconds must be in (0, " + std::to_string(int64_t(kMaxDeadlineSeconds)) +
               "], got " + exact_text(f.ack_deadline_seconds));
    // TCP keepalive counts whole seconds: below 1 s it could not be honoured.
    if (!(f.silence_seconds >= 1) || f.silence_seconds > kMaxDeadlineSeconds)
      fail(f.line_of("silence_seconds"),
           "[federation] silence_seconds must be in [1, " + std::to_string(int64_t(kMaxDeadlineSeconds)) + "], got " +
               exact_text(f.silence_seconds));
    if (f.receive_window < 0 || f.receive_window > int64_t(kMaxTopologyNodes))
      fail(f.line_of("receive_window"), "[federation] receive_window must be in [0, " +
                                            std::to_string(kMaxTopologyNodes) + "], got " +
                                            std::to_string(f.receive_window));
    // A topology built in memory may hold any value the enum's storage allows.
    if (f.hop_encryption != HopEncryption::None && f.hop_encryption != HopEncryption::Curve &&
        f.hop_encryption != HopEncryption::Auto)
      fail(f.line_of("hop_encryption"), "[federation] hop_encryption must be \"none\", \"curve\" or \"auto\"");
    if (f.hub && f.mode != TopologyMode::Star)
      fail(f.line_of("hub"),
           "[federation] hub is only meaningful in star mode (this is " + std::string(to_string(f.mode)) + ")");
    if (f.start && f.mode != TopologyMode::Ring)
      fail(f.line_of("start"),
           "[federation] start is only meaningful in ring mode (this is " + std::string(to_string(f.mode)) + ")");
    option_keys(f.options, f.line, "[federation.options]");
    option_keys(f.data, f.line, "[federation.data]");
  }

  void nodes(bool require_keys) const {
    std::map<NodeId, int> ids;
    std::map<std::string, const TopologyNode*> names, addresses, keys, states;
    std::map<int64_t, const TopologyNode*> parts;
    const int64_t n_nodes = static_cast<int64_t>(t_.nodes.size());
    for (const auto& n : t_.nodes) {
      const std::string who = t_.describe(n.id);
      if (!ids.emplace(n.id, n.line).second)
        fail(n.line, "duplicate node id " + std::to_string(n.id) + " (also at " + t_.where(ids[n.id]) + ")");
      // Written but empty: an empty name or folder is a mistake, not a request for the default.
      for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"name", &n.name},
                                       {"state_dir", &n.state_dir}, {"key_dir", &n.key_dir}})
        if (value->empty() && n.key_lines.count(key))
          fail(n.line_of(key), who + ": " + key + " is empty; leave it out for the default");
      if (!n.name.empty()) {
        if (!name_ok(n.name))
          fail(n.line_of("name"), who + ": name '" + n.name +
                           "' must be 1 to 32 letters, digits, '_', '-' or '.', and not only digits (those are ids)");
        if (!names.emplace(n.name, &n).second)
          fail(n.line_of("name"),
               who + ": the name '" + n.name + "' is already used by " + t_.describe(names[n.name]->id));
      }
      if (!n.reachable)
        for (const auto& [key, value] :
             {std::pair<const char*, const std::string*>{"address", &n.address}, {"bind", &n.bind}})
          if (!value->empty())
            fail(n.line_of(key), who + " has reachable = false, so it never listens: leave out its " + key +
                                     " (it dials its neighbours; docs/deployment.md)");
      std::string why;
      const auto ep = n.address.empty() ? std::nullopt : topo::parse_endpoint(n.address, false, &why);
      if (!n.address.empty() && !ep) fail(n.line_of("address"), who + ": address '" + n.address + "' " + why);
      if (ep && !addresses.emplace(ep->key(), &n).second)
        fail(n.line_of("address"), who + ": address '" + n.address + "' is already the address of " +
                         t_.describe(addresses[ep->key()]->id) + " (line " +
                         std::to_string(addresses[ep->key()]->line) + ")");
      if (!n.bind.empty() && !topo::parse_endpoint(n.bind, true, &why))
        fail(n.line_of("bind"), who + ": bind '" + n.bind + "' " + why);
      if (!n.public_key_text.empty()) {
        const auto key = decode_public_key(n.public_key_text, &why);
        if (!key) fail(n.line_of("public_key"), who + ": public_key is malformed: " + why);
        if (n.public_key && *n.public_key != *key)
          fail(n.line_of("public_key"), who + ": public_key text and decoded key disagree");
      }
      if (require_keys && !n.public_key)
        fail(n.line_of("public_key"),
             who + " has no public key: give public_key = \"<64 hex digits>\", or key_dir = \"DIR\" "
                           "with DIR/" + std::string(kNodePublicKeyFile) + " present (fednode keygen --out DIR)");
      if (n.public_key) {
        const std::string hex = public_key_hex(*n.public_key);
        if (!keys.emplace(hex, &n).second)
          fail(n.line, who + " has the same public key as " + t_.describe(keys[hex]->id) +
                           ": every node needs its own identity");
      }
      const std::string state = std::filesystem::path(t_.state_dir_of(n.id)).lexically_normal().string();
      if (!states.emplace(state, &n).second)
        fail(n.line_of("state_dir"),
             who + ": state directory '" + state + "' is also used by " + t_.describe(states[state]->id));
      if (n.partition_index && *n.partition_index >= n_nodes)
        fail(n.line_of("partition_index"),
             who + ": partition_index " + std::to_string(*n.partition_index) + " is out of range: the " +
                         std::to_string(n_nodes) + " nodes hold parts 0 to " + std::to_string(n_nodes - 1));
      const int64_t part = n.partition_index ? *n.partition_index : -1;
      if (part >= 0 && !parts.emplace(part, &n).second)
        fail(n.line_of("partition_index"), who + ": partition_index " + std::to_string(part) + " is also held by " +
                         t_.describe(parts[part]->id));
      option_keys(n.options, n.line, who + " options");
      option_keys(n.data, n.line, who + " data");
    }
    // Defaults (a node's rank) may collide with explicit indices; check the effective ones.
    std::map<int64_t, NodeId> effective;
    for (const auto& n : t_.nodes) {
      const int64_t p = t_.partition_index(n.id);
      if (!effective.emplace(p, n.id).second)
        fail(n.line_of("partition_index"),
             t_.describe(n.id) + " would hold part " + std::to_string(p) + " of the partition, as does " +
                         t_.describe(effective[p]) + "; give every node an explicit, distinct partition_index");
    }
    const auto& f = t_.federation;
    if (f.hub && !t_.find(*f.hub)) fail(f.line_of("hub"),
         "[federation] hub = " + std::to_string(*f.hub) + ": no node has that id");
    if (f.start && !t_.find(*f.start))
      fail(f.line_of("start"), "[federation] start = " + std::to_string(*f.start) + ": no node has that id");
  }

  static bool name_ok(const std::string& name) {
    const bool charset = std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
    const bool digits = std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
    return charset && !name.empty() && name.size() <= 32 && !digits;
  }

  void relays(bool require_keys) const {
    std::set<std::string> names, keys;
    for (const auto& n : t_.nodes)
      if (n.public_key) keys.insert(public_key_hex(*n.public_key));
    std::map<std::string, const TopologyRelay*> addresses;
    for (const auto& r : t_.relays) {
      const std::string who = "relay '" + r.name + "'";
      if (!name_ok(r.name))
        fail(r.line_of("name"), who + ": a relay's name must be 1 to 32 letters, digits, '_', '-' or '.', and not only digits");
      if (!names.insert(r.name).second) fail(r.line_of("name"), who + " is listed twice");
      std::string why;
      const auto ep = topo::parse_endpoint(r.address, false, &why);
      if (!ep) fail(r.line_of("address"), who + ": address '" + r.address + "' " + why);
      if (!addresses.emplace(ep->key(), &r).second)
        fail(r.line_of("address"), who + ": address '" + r.address + "' is also relay '" + addresses[ep->key()]->name + "'s");
      if (!r.bind.empty() && !topo::parse_endpoint(r.bind, true, &why))
        fail(r.line_of("bind"), who + ": bind '" + r.bind + "' " + why);
      if (require_keys && !r.public_key)
        fail(r.line_of("public_key"), who + " has no public key: give public_key = \"<64 hex digits>\", or key_dir = "
                                          "\"DIR\" with DIR/" + std::string(kNodePublicKeyFile) +
                                          " present (fednode keygen --out DIR)");
      if (r.public_key && !keys.insert(public_key_hex(*r.public_key)).second)
        fail(r.line_of("public_key"), who + " has the public key of a node or of another relay: a relay needs its own");
    }
  }

  void edges() const {
    std::map<std::pair<NodeId, NodeId>, int> seen;
    for (const auto& e : t_.edges) {
      const std::string what = "edge " + std::to_string(e.from) + " -> " + std::to_string(e.to);
      if (!t_.find(e.from)) fail(e.line, what + ": no node has id " + std::to_string(e.from));
      if (!t_.find(e.to)) fail(e.line, what + ": no node has id " + std::to_string(e.to));
      if (e.from == e.to)
        fail(e.line, what + " is a self-loop: a node already merges its own data");
      if (!seen.emplace(std::make_pair(e.from, e.to), e.line).second)
        fail(e.line, what + " is listed twice (also at " + t_.where(seen[{e.from, e.to}]) + ")");
      if (e.feedback && t_.federation.mode != TopologyMode::Graph)
        fail(e.line, what + ": feedback edges exist only in graph mode");
      for (const auto& via : e.via)
        if (std::none_of(t_.relays.begin(), t_.relays.end(), [&](const TopologyRelay& r) { return r.name == via; }))
          fail(e.line, what + ": via names relay '" + via + "', which no [[relay]] section lists");
    }
  }

  // Degrees at most one everywhere; reports the first node with two.
  void at_most_one(const char* mode, const char* role) const {
    for (size_t v = 0; v < g_.size(); ++v) {
      if (g_.out[v].size() > 1)
        fail(edge_line(v, g_.out[v][1]), std::string(mode) + " mode: " + name(v) + " has " +
                                             std::to_string(g_.out[v].size()) + " outgoing edges (to " +
                                             id_list(g_.out[v]) + "); " + role + " sends to exactly one next node");
      if (g_.in[v].size() > 1)
        fail(edge_line(g_.in[v][1], v), std::string(mode) + " mode: " + name(v) + " has " +
                                            std::to_string(g_.in[v].size()) + " incoming edges (from " +
                                            id_list(g_.in[v]) + "); " + role + " receives from exactly one node");
    }
  }

  void linear() const {
    at_most_one("linear", "a chain");
    const auto cycle = topo::find_cycle(g_);
    if (!cycle.empty())
      fail(edge_line(cycle.back(), cycle.front()),
           "linear mode: the edges " + path(cycle) + " form a cycle" + lines(cycle) +
               "; a chain has a first and a last node (use mode = \"ring\" for a cycle)");
    std::vector<size_t> starts;
    for (size_t v = 0; v < g_.size(); ++v)
      if (g_.in[v].empty()) starts.push_back(v);
    if (starts.size() > 1)
      fail(0, "linear mode: the edges make " + std::to_string(starts.size()) +
                  " separate chains, starting at nodes " + id_list(starts) +
                  "; join them into one chain through every node");
  }

  void ring() const {
    if (g_.size() < 2)
      fail(0, "ring mode needs at least 2 nodes (a single node is mode = \"linear\" with no edges)");
    at_most_one("ring", "in a ring each node");
    for (size_t v = 0; v < g_.size(); ++v) {
      if (g_.out[v].empty())
        fail(t_.node(g_.ids[v]).line, "ring mode: " + name(v) + " has no outgoing edge; in a ring each node sends to the next");
      if (g_.in[v].empty())
        fail(t_.node(g_.ids[v]).line, "ring mode: " + name(v) + " has no incoming edge; in a ring each node receives from the previous");
    }
    // Every degree is one, so the edges are disjoint cycles; there must be exactly one.
    std::vector<char> seen(g_.size(), 0);
    std::vector<std::vector<size_t>> cycles;
    for (size_t s = 0; s < g_.size(); ++s) {
      if (seen[s]) continue;
      cycles.emplace_back();
      for (size_t v = s; !seen[v]; v = g_.out[v][0]) {
        seen[v] = 1;
        cycles.back().push_back(v);
      }
    }
    if (cycles.size() > 1)
      fail(0, "ring mode: the edges make " + std::to_string(cycles.size()) + " separate cycles (" + path(cycles[0]) +
                  " and " + path(cycles[1]) + "); a ring is one cycle through every node");
  }

  void star() const {
    const auto& f = t_.federation;
    if (!f.hub) fail(f.line, "star mode needs hub = <node id> in [federation]");
    if (g_.size() < 2) fail(f.line, "star mode needs the hub and at least one leaf");
    const size_t hub = g_.index.at(*f.hub);
    for (const auto& e : t_.edges) {
      const std::string what = "star mode: edge " + std::to_string(e.from) + " -> " + std::to_string(e.to);
      if (e.from == *f.hub)
        fail(e.line, what + " leaves the hub; list only leaf -> hub edges (the hub sends its head back to "
                            "every leaf without an edge for it)");
      if (e.to != *f.hub)
        fail(e.line, what + " joins two leaves; in a star every edge goes from a leaf to the hub " +
                         std::to_string(*f.hub));
    }
    for (size_t v = 0; v < g_.size(); ++v)
      if (v != hub && g_.out[v].empty())
        fail(t_.node(g_.ids[v]).line, "star mode: leaf " + name(v) + " has no edge to the hub; add [[edge]] from = " +
                                          id(v) + ", to = " + id(hub));
  }

  void graph() const {
    if (g_.size() > 1) {
      const auto parts = topo::weak_components(g_);
      for (const auto& p : parts)
        if (p.size() == 1)
          fail(t_.node(g_.ids[p[0]]).line, "graph mode: " + name(p[0]) +
                                               " has no edges: it would neither send nor receive; connect or remove it");
      if (parts.size() > 1)
        fail(0, "graph mode: the nodes form " + std::to_string(parts.size()) +
                    " groups with no edge between them (one holds " + id_list(parts[0]) + "; another " +
                    id_list(parts[1]) + "); a topology file describes one federation");
    }
    std::vector<size_t> stuck;
    topo::topological_order(g_, &stuck);
    if (!stuck.empty()) {
      const auto cycle = topo::find_cycle(g_);
      fail(edge_line(cycle.back(), cycle.front()),
           "graph mode: the edges " + path(cycle) + " form a cycle" + lines(cycle) +
               "; a node waits for all its in-neighbours, so nodes " + id_list(stuck) +
               " could never finish. Mark one edge of the cycle feedback = true (its knowledge is merged "
               "after the receiver has finished), or use mode = \"ring\"");
    }
    // A feedback edge s -> r is a way back along a path r -> ... -> s; anywhere else it would
    // only make r skip waiting for s, which deadlines already handle.
    const auto order = topo::topological_order(g_);
    const auto anc = topo::closed_ancestors(g_, order);
    for (size_t s = 0; s < g_.size(); ++s)
      for (size_t r : g_.fb_out[s])
        if (!anc[s].test(r))
          fail(edge_line(s, r), "graph mode: edge " + id(s) + " -> " + id(r) + " is marked feedback but " + id(r) +
                                    " has no path to " + id(s) + ", so it closes no cycle; drop feedback = true");
  }

  const Topology& t_;
  Digraph g_;
};

}  // namespace

std::string run_name_problem(const std::string& run) {
  if (run.empty()) return "is empty: name the run, or leave it out for the default";
  if (run.size() > kMaxRunNameBytes)
    return "is " + std::to_string(run.size()) + " characters long, at most " + std::to_string(kMaxRunNameBytes) +
           " are allowed";
  // The name reaches logs and error messages: printable ASCII only. An offending character is
  // named by position and code, never echoed.
  for (size_t i = 0; i < run.size(); ++i) {
    const auto c = static_cast<unsigned char>(run[i]);
    if (c < 0x20 || c > 0x7E) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", c);
      return "has character " + std::to_string(i + 1) + " (byte " + code + "), which is not printable ASCII";
    }
  }
  return "";
}

void validate_topology(const Topology& topology, bool require_keys) { Checker(topology).run(require_keys); }

}  // namespace fednode
