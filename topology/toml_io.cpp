#include "topology/toml_io.h"

#include "topology/toml_guard.h"

// toml++ 3.3 asserts on some malformed headers such as "[[[" (fixed upstream in
// marzer/tomlplusplus#301): in debug builds the process aborts, and with NDEBUG the assertion
// becomes an optimiser assumption (undefined behaviour under clang). The code right after it
// reports the error properly, so the parser is compiled with assertions that do nothing and are
// never assumptions: a bad file is a parse error in every build type.
#pragma push_macro("NDEBUG")
#undef NDEBUG
#define TOML_ASSERT(expr) static_cast<void>(0)
#include <toml++/toml.h>
#pragma pop_macro("NDEBUG")

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace fednode {
namespace {

// Shortest decimal text that reads back as the same double, so options keep the value the user
// wrote (0.1 stays "0.1", not "0.10000000000000001").
std::string shortest(double v) {
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

namespace topo {
namespace {

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

// A reference to a node: an integer id, or a string naming a node.
struct Ref {
  bool is_name = false;
  int64_t id = 0;
  std::string name;
  int line = 0;
};

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(int line, const std::string& message) const {
    throw InputError((line > 0 ? source_ + ":" + std::to_string(line) : source_) + ": " + message);
  }

  void only_keys(const toml::table& t, const std::string& what, std::initializer_list<const char*> known) const {
    for (const auto& [key, value] : t) {
      bool ok = false;
      for (const char* k : known) ok = ok || key.str() == k;
      if (ok) continue;
      std::string list;
      for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
      fail(line_of(value), "unknown key '" + std::string(key.str()) + "' in " + what + " (known keys: " + list + ")");
    }
  }

  std::optional<std::string> string(const toml::table& t, const char* key, const std::string& what) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (const auto* s = n->as_string()) return s->get();
    fail(line_of(*n), what + ": '" + key + "' must be a string, got " + type_name(*n));
  }

  std::optional<int64_t> integer(const toml::table& t, const char* key, const std::string& what, int64_t lo,
                                 int64_t hi) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    const auto* i = n->as_integer();
    if (!i) fail(line_of(*n), what + ": '" + key + "' must be an integer, got " + type_name(*n));
    const int64_t v = i->get();
    if (v < lo || v > hi)
      fail(line_of(*n), what + ": '" + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            "], got " + std::to_string(v));
    return v;
  }

  std::optional<double> number(const toml::table& t, const char* key, const std::string& what) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (const auto* i = n->as_integer()) return static_cast<double>(i->get());
    if (const auto* f = n->as_floating_point()) {
      if (!std::isfinite(f->get())) fail(line_of(*n), what + ": '" + key + "' must be finite");
      return f->get();
    }
    fail(line_of(*n), what + ": '" + key + "' must be a number, got " + type_name(*n));
  }

  std::optional<bool> boolean(const toml::table& t, const char* key, const std::string& what) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (const auto* b = n->as_boolean()) return b->get();
    fail(line_of(*n), what + ": '" + key + "' must be true or false, got " + type_name(*n));
  }

  std::optional<Ref> ref(const toml::table& t, const char* key, const std::string& what) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    Ref r;
    r.line = line_of(*n);
    if (const auto* i = n->as_integer()) {
      r.id = i->get();
      if (r.id < 0 || r.id > 0xFFFFFFFFLL)
        fail(r.line, what + ": '" + key + "' = " + std::to_string(r.id) + " is not a node id (0 to 4294967295)");
      return r;
    }
    if (const auto* s = n->as_string()) {
      r.is_name = true;
      r.name = s->get();
      return r;
    }
    fail(r.line, what + ": '" + key + "' must be a node id (integer) or a node name (string), got " + type_name(*n));
  }

  // A name, or an array of names.
  std::vector<std::string> names(const toml::table& t, const char* key, const std::string& what) const {
    const toml::node* n = t.get(key);
    if (!n) return {};
    if (const auto* s = n->as_string()) return {s->get()};
    const auto* arr = n->as_array();
    if (!arr) fail(line_of(*n), what + ": '" + key + "' must be a name or an array of names, got " + type_name(*n));
    if (arr->size() > kMaxRelays) fail(line_of(*n), what + ": '" + key + "' lists more than " + std::to_string(kMaxRelays));
    std::vector<std::string> out;
    for (const auto& item : *arr) {
      const auto* s = item.as_string();
      if (!s) fail(line_of(item), what + ": '" + key + "' must hold names (strings), got " + type_name(item));
      out.push_back(s->get());
    }
    return out;
  }

  // Option values stay text; tables of tables or arrays have no command-line equivalent.
  OptionMap options(const toml::table& t, const char* key, const std::string& what) const {
    OptionMap m;
    const toml::node* n = t.get(key);
    if (!n) return m;
    const auto* table = n->as_table();
    if (!table) fail(line_of(*n), what + ": '" + key + "' must be a table, got " + type_name(*n));
    for (const auto& [k, v] : *table) {
      const std::string name(k.str());
      const std::string where = what + "." + key + ": '" + name + "'";
      if (const auto* s = v.as_string()) m[name] = s->get();
      else if (const auto* i = v.as_integer()) m[name] = std::to_string(i->get());
      else if (const auto* f = v.as_floating_point()) {
        if (!std::isfinite(f->get())) fail(line_of(v), where + " must be finite");
        m[name] = shortest(f->get());
      } else if (const auto* b = v.as_boolean()) m[name] = b->get() ? "true" : "false";
      else fail(line_of(v), where + " must be a string, number or boolean, got " + type_name(v));
    }
    return m;
  }

 private:
  std::string source_;
};

NodeId resolve(const Reader& r, const Ref& ref, const std::map<std::string, NodeId>& names, const std::string& what) {
  if (!ref.is_name) return static_cast<NodeId>(ref.id);
  const auto it = names.find(ref.name);
  if (it == names.end()) r.fail(ref.line, what + ": no node is named '" + ref.name + "'");
  return it->second;
}

}  // namespace

Topology parse_toml(const std::string& text, const std::string& source, const std::string& base_dir) {
  Topology topology;
  topology.source = source;
  topology.base_dir = base_dir;
  const Reader r(source);

  check_toml_text(text, source);
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw InputError(source + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
                     ": not valid TOML: " + std::string(e.description()));
  }
  r.only_keys(root, "the file", {"federation", "node", "edge", "relay"});

  // [federation]
  const toml::node* fed_node = root.get("federation");
  if (!fed_node) r.fail(0, "missing the [federation] table (mode, method, ...)");
  const auto* fed = fed_node->as_table();
  if (!fed) r.fail(line_of(*fed_node), "'federation' must be a table, got " + std::string(type_name(*fed_node)));
  auto& f = topology.federation;
  f.line = line_of(*fed);
  for (auto&& [key, value] : *fed) f.key_lines[std::string(key.str())] = line_of(value);
  const std::string fw = "[federation]";
  r.only_keys(*fed, fw, {"mode", "method", "run", "seed", "deadline_seconds", "ack_deadline_seconds", "silence_seconds", "receive_window", "hop_encryption", "discovery_port", "hub", "start",
                          "options", "data", "limits"});
  const auto mode = r.string(*fed, "mode", fw);
  if (!mode) r.fail(f.line, "[federation] needs mode = \"linear\", \"ring\", \"star\" or \"graph\"");
  try {
    f.mode = parse_topology_mode(*mode);
  } catch (const InputError& e) {
    r.fail(line_of(*fed->get("mode")), std::string("[federation]: ") + e.what());
  }
  const auto method = r.string(*fed, "method", fw);
  if (!method) r.fail(f.line, "[federation] needs method = \"fedpft\", \"fedcgs\" or \"fedtc\"");
  f.method = *method;
  f.run = r.string(*fed, "run", fw);
  f.seed = static_cast<uint64_t>(r.integer(*fed, "seed", fw, 0, INT64_MAX).value_or(0));
  f.deadline_seconds = r.number(*fed, "deadline_seconds", fw).value_or(kDefaultDeadlineSeconds);
  f.ack_deadline_seconds = r.number(*fed, "ack_deadline_seconds", fw).value_or(kDefaultAckDeadlineSeconds);
  f.silence_seconds = r.number(*fed, "silence_seconds", fw).value_or(kDefaultSilenceSeconds);
  f.receive_window = r.integer(*fed, "receive_window", fw, 0, kMaxTopologyNodes).value_or(kDefaultReceiveWindow);
  f.discovery_port = r.integer(*fed, "discovery_port", fw, 1, 65535).value_or(kDefaultDiscoveryPort);
  if (const auto hop = r.string(*fed, "hop_encryption", fw)) {
    try {
      f.hop_encryption = parse_hop_encryption(*hop);
    } catch (const InputError& e) {
      r.fail(line_of(*fed->get("hop_encryption")), std::string("[federation]: ") + e.what());
    }
  }
  const auto hub = r.ref(*fed, "hub", fw);
  const auto start = r.ref(*fed, "start", fw);
  f.options = r.options(*fed, "options", fw);
  f.data = r.options(*fed, "data", fw);
  f.limits = r.options(*fed, "limits", fw);

  // [[node]]
  std::map<std::string, NodeId> names;
  if (const toml::node* n = root.get("node")) {
    const auto* arr = n->as_array();
    if (!arr || !arr->is_array_of_tables())
      r.fail(line_of(*n), "'node' must be an array of tables: write each node as a [[node]] section");
    if (arr->size() > kMaxTopologyNodes)
      r.fail(line_of(*n), "at most " + std::to_string(kMaxTopologyNodes) + " nodes, the file lists " +
                              std::to_string(arr->size()));
    for (const auto& item : *arr) {
      const auto& t = *item.as_table();
      TopologyNode node;
      node.line = line_of(t);
      for (auto&& [key, value] : t) node.key_lines[std::string(key.str())] = line_of(value);
      const std::string w = "[[node]]";
      r.only_keys(t, w, {"id", "name", "address", "bind", "public_key", "key_dir", "state_dir", "partition_index",
                         "reachable", "options", "data"});
      const auto id = r.integer(t, "id", w, 0, 0xFFFFFFFFLL);
      if (!id) r.fail(node.line, "[[node]] needs id = <integer from 0 to 4294967295>");
      node.id = static_cast<NodeId>(*id);
      const std::string wn = "node " + std::to_string(node.id);
      node.name = r.string(t, "name", wn).value_or("");
      // Without one the node is found by discovery (`fednode run --discover`), which the node
      // checks: the file alone cannot tell how it will be run.
      node.address = r.string(t, "address", wn).value_or("");
      node.bind = r.string(t, "bind", wn).value_or("");
      node.public_key_text = r.string(t, "public_key", wn).value_or("");
      node.key_dir = r.string(t, "key_dir", wn).value_or("");
      node.state_dir = r.string(t, "state_dir", wn).value_or("");
      node.partition_index = r.integer(t, "partition_index", wn, 0, INT64_MAX);
      node.reachable = r.boolean(t, "reachable", wn).value_or(true);
      node.options = r.options(t, "options", wn);
      node.data = r.options(t, "data", wn);
      if (!node.name.empty() && !names.emplace(node.name, node.id).second)
        r.fail(node.line, wn + ": the name '" + node.name + "' is already used by node " +
                              std::to_string(names[node.name]));
      topology.nodes.push_back(std::move(node));
    }
  }

  if (hub) f.hub = resolve(r, *hub, names, fw + " hub");
  if (start) f.start = resolve(r, *start, names, fw + " start");

  // [[edge]]
  if (const toml::node* n = root.get("edge")) {
    const auto* arr = n->as_array();
    if (!arr || !arr->is_array_of_tables())
      r.fail(line_of(*n), "'edge' must be an array of tables: write each edge as an [[edge]] section");
    const size_t max_edges = kMaxGraphNodes * (kMaxGraphNodes - 1);  // edges are for graph mode
    if (arr->size() > max_edges) r.fail(line_of(*n), "too many edges: " + std::to_string(arr->size()));
    for (const auto& item : *arr) {
      const auto& t = *item.as_table();
      TopologyEdge edge;
      edge.line = line_of(t);
      const std::string w = "[[edge]]";
      r.only_keys(t, w, {"from", "to", "feedback", "via"});
      const auto from = r.ref(t, "from", w);
      const auto to = r.ref(t, "to", w);
      if (!from || !to) r.fail(edge.line, "[[edge]] needs both from = <node> and to = <node>");
      edge.from = resolve(r, *from, names, "[[edge]] from");
      edge.to = resolve(r, *to, names, "[[edge]] to");
      edge.feedback = r.boolean(t, "feedback", w).value_or(false);
      edge.via = r.names(t, "via", w);
      topology.edges.push_back(edge);
    }
  }

  // [[relay]]
  if (const toml::node* n = root.get("relay")) {
    const auto* arr = n->as_array();
    if (!arr || !arr->is_array_of_tables())
      r.fail(line_of(*n), "'relay' must be an array of tables: write each relay as a [[relay]] section");
    if (arr->size() > kMaxRelays)
      r.fail(line_of(*n), "at most " + std::to_string(kMaxRelays) + " relays, the file lists " + std::to_string(arr->size()));
    for (const auto& item : *arr) {
      const auto& t = *item.as_table();
      TopologyRelay relay;
      relay.line = line_of(t);
      for (auto&& [key, value] : t) relay.key_lines[std::string(key.str())] = line_of(value);
      const std::string w = "[[relay]]";
      r.only_keys(t, w, {"name", "address", "bind", "public_key", "key_dir"});
      const auto name = r.string(t, "name", w);
      if (!name) r.fail(relay.line, "[[relay]] needs name = \"<letters, digits, _ - .>\"");
      relay.name = *name;
      const std::string wr = "relay '" + relay.name + "'";
      const auto address = r.string(t, "address", wr);
      if (!address) r.fail(relay.line, wr + " needs address = \"tcp://HOST:PORT\", where every node reaches it");
      relay.address = *address;
      relay.bind = r.string(t, "bind", wr).value_or("");
      relay.public_key_text = r.string(t, "public_key", wr).value_or("");
      relay.key_dir = r.string(t, "key_dir", wr).value_or("");
      topology.relays.push_back(std::move(relay));
    }
  }
  return topology;
}

}  // namespace topo

namespace {

bool bare_key(const std::string& k) {
  if (k.empty()) return false;
  for (char c : k)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04X", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string key_text(const std::string& k) { return bare_key(k) ? k : quoted(k); }

// An option is written unquoted only when reading it back gives the same text, so a round trip
// through the file never changes a value.
std::string value_text(const std::string& v) {
  if (v == "true" || v == "false") return v;
  if (!v.empty() && v.size() < 32) {
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(v.c_str(), &end, 10);
    if (errno == 0 && *end == '\0' && std::to_string(i) == v) return v;
    const bool floaty = v.find_first_of(".eE") != std::string::npos &&
                        v.find_first_not_of("0123456789.eE+-") == std::string::npos;
    if (floaty) {
      const double d = std::strtod(v.c_str(), &end);
      // TOML needs a digit on both sides of the point; shortest() never writes ".5" or "5.".
      if (*end == '\0' && std::isfinite(d) && shortest(d) == v) return v;
    }
  }
  return quoted(v);
}


std::string float_text(double v) {
  // Whole numbers of seconds read best as such: %g would write 300 as "3e+02".
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }
  std::string s = shortest(v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

void write_options(std::ostringstream& out, const std::string& header, const OptionMap& m) {
  if (m.empty()) return;
  out << "\n[" << header << "]\n";
  for (const auto& [k, v] : m) out << key_text(k) << " = " << value_text(v) << "\n";
}

}  // namespace

std::string to_toml(const Topology& t) {
  std::ostringstream out;
  const auto& f = t.federation;
  out << "# fednode topology: " << to_string(f.mode) << " of " << t.nodes.size()
      << " node(s). Format and semantics: docs/topologies.md\n";
  out << "[federation]\n";
  out << "mode = " << quoted(to_string(f.mode)) << "\n";
  out << "method = " << quoted(f.method) << "\n";
  if (f.run) out << "run = " << quoted(*f.run) << "\n";
  out << "seed = " << f.seed << "\n";
  out << "deadline_seconds = " << float_text(f.deadline_seconds) << "\n";
  // Only when set: the default run name hashes this text, and files without the key must keep
  // the run name they had before the key existed.
  if (f.ack_deadline_seconds != kDefaultAckDeadlineSeconds)
    out << "ack_deadline_seconds = " << float_text(f.ack_deadline_seconds) << "\n";
  if (f.silence_seconds != kDefaultSilenceSeconds) out << "silence_seconds = " << float_text(f.silence_seconds) << "\n";
  if (f.receive_window != kDefaultReceiveWindow) out << "receive_window = " << f.receive_window << "\n";
  if (f.discovery_port != kDefaultDiscoveryPort) out << "discovery_port = " << f.discovery_port << "\n";
  if (f.hop_encryption != HopEncryption::Auto) out << "hop_encryption = " << quoted(to_string(f.hop_encryption)) << "\n";
  if (f.hub) out << "hub = " << *f.hub << "\n";
  if (f.start) out << "start = " << *f.start << "\n";
  write_options(out, "federation.options", f.options);
  write_options(out, "federation.data", f.data);
  write_options(out, "federation.limits", f.limits);
  for (const auto& n : t.nodes) {
    out << "\n[[node]]\n";
    out << "id = " << n.id << "\n";
    if (!n.name.empty()) out << "name = " << quoted(n.name) << "\n";
    if (!n.address.empty()) out << "address = " << quoted(n.address) << "\n";
    if (!n.bind.empty()) out << "bind = " << quoted(n.bind) << "\n";
    if (!n.public_key_text.empty()) out << "public_key = " << quoted(n.public_key_text) << "\n";
    if (!n.key_dir.empty()) out << "key_dir = " << quoted(n.key_dir) << "\n";
    if (!n.state_dir.empty()) out << "state_dir = " << quoted(n.state_dir) << "\n";
    if (n.partition_index) out << "partition_index = " << *n.partition_index << "\n";
    if (!n.reachable) out << "reachable = false\n";
    write_options(out, "node.options", n.options);
    write_options(out, "node.data", n.data);
  }
  for (const auto& e : t.edges) {
    out << "\n[[edge]]\n";
    out << "from = " << e.from << "\n";
    out << "to = " << e.to << "\n";
    if (e.feedback) out << "feedback = true\n";
    if (e.via.size() == 1) out << "via = " << quoted(e.via[0]) << "\n";
    if (e.via.size() > 1) {
      out << "via = [";
      for (size_t i = 0; i < e.via.size(); ++i) out << (i ? ", " : "") << quoted(e.via[i]);
      out << "]\n";
    }
  }
  for (const auto& r : t.relays) {
    out << "\n[[relay]]\n";
    out << "name = " << quoted(r.name) << "\n";
    out << "address = " << quoted(r.address) << "\n";
    if (!r.bind.empty()) out << "bind = " << quoted(r.bind) << "\n";
    if (!r.public_key_text.empty()) out << "public_key = " << quoted(r.public_key_text) << "\n";
    if (!r.key_dir.empty()) out << "key_dir = " << quoted(r.key_dir) << "\n";
  }
  return out.str();
}

}  // namespace fednode
