#include "topology/topology.h"

#include "topology/address.h"

#include "core/digest.h"
#include "topology/toml_io.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

namespace fednode {

namespace fs = std::filesystem;

const char* to_string(TopologyMode mode) {
  switch (mode) {
    case TopologyMode::Linear: return "linear";
    case TopologyMode::Ring: return "ring";
    case TopologyMode::Star: return "star";
    case TopologyMode::Graph: return "graph";
  }
  return "?";
}

TopologyMode parse_topology_mode(const std::string& s) {
  if (s == "linear") return TopologyMode::Linear;
  if (s == "ring") return TopologyMode::Ring;
  if (s == "star") return TopologyMode::Star;
  if (s == "graph") return TopologyMode::Graph;
  throw InputError("unknown topology mode '" + s + "' (expected linear, ring, star or graph)");
}

const char* to_string(HopEncryption h) {
  switch (h) {
    case HopEncryption::None: return "none";
    case HopEncryption::Curve: return "curve";
    case HopEncryption::Auto: return "auto";
  }
  return "?";
}

HopEncryption parse_hop_encryption(const std::string& s) {
  if (s == "none") return HopEncryption::None;
  if (s == "curve") return HopEncryption::Curve;
  if (s == "auto") return HopEncryption::Auto;
  throw InputError("unknown hop encryption '" + s + "' (expected none, curve or auto)");
}

bool Topology::beyond_loopback() const {
  const auto beyond = [](const std::string& address) {
    if (address.empty()) return false;
    const auto endpoint = topo::parse_endpoint(address, true, nullptr);
    return !endpoint || !topo::loopback_host(endpoint->host);
  };
  for (const auto& n : nodes) {
    // To be found by discovery: on a network. An unreachable node has no address by design.
    if (n.address.empty() && n.reachable) return true;
    if (beyond(n.address) || beyond(n.bind)) return true;
  }
  for (const auto& r : relays)
    if (beyond(r.address) || beyond(r.bind)) return true;
  return false;
}

HopEncryption Topology::hop_encryption() const {
  if (federation.hop_encryption != HopEncryption::Auto) return federation.hop_encryption;
  return beyond_loopback() ? HopEncryption::Curve : HopEncryption::None;
}

const TopologyNode* Topology::find(NodeId id) const {
  for (const auto& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

const TopologyNode& Topology::node(NodeId id) const {
  if (const auto* n = find(id)) return *n;
  throw InputError(source + ": no node has id " + std::to_string(id));
}

const TopologyNode& Topology::lookup(const std::string& id_or_name) const {
  const bool numeric = !id_or_name.empty() && id_or_name.size() <= 10 &&
                       std::all_of(id_or_name.begin(), id_or_name.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (numeric) {
    const unsigned long long v = std::stoull(id_or_name);
    if (v <= 0xFFFFFFFFull)
      if (const auto* n = find(static_cast<NodeId>(v))) return *n;
  } else {
    for (const auto& n : nodes)
      if (n.name == id_or_name) return n;
  }
  throw InputError(source + ": no node has " + (numeric ? "id " : "name '") + id_or_name +
                   (numeric ? "" : "'"));
}

std::string Topology::describe(NodeId id) const {
  std::string s = "node " + std::to_string(id);
  const auto* n = find(id);
  if (n && !n->name.empty()) s += " (" + n->name + ")";
  return s;
}

std::string Topology::where(int line) const {
  return line > 0 ? source + ":" + std::to_string(line) : source;
}

std::string Topology::resolve(const std::string& path) const {
  if (path.empty()) return path;
  const fs::path p(path);
  if (p.is_absolute() || base_dir.empty() || base_dir == ".") return p.lexically_normal().string();
  return (fs::path(base_dir) / p).lexically_normal().string();
}

std::string Topology::state_dir_of(NodeId id) const {
  const auto& n = node(id);
  return resolve(n.state_dir.empty() ? "state/n" + std::to_string(id) : n.state_dir);
}

std::string Topology::key_dir_of(NodeId id) const { return resolve(node(id).key_dir); }

int64_t Topology::partition_index(NodeId id) const {
  const auto& n = node(id);
  if (n.partition_index) return *n.partition_index;
  const auto all = ids();
  return std::lower_bound(all.begin(), all.end(), id) - all.begin();
}

OptionMap Topology::options_for(NodeId id) const {
  OptionMap m = federation.options;
  for (const auto& [k, v] : node(id).options) m[k] = v;
  return m;
}

OptionMap Topology::data_for(NodeId id) const {
  OptionMap m = federation.data;
  const OptionMap& own = node(id).data;
  // A node that names its own source replaces the shared one rather than adding to it (the
  // data options take a dataset or four files, never both).
  static const char* const dataset_keys[] = {"dataset", "backbone", "input-size", "threads-extract"};
  static const char* const file_keys[] = {"train-features", "train-labels", "test-features", "test-labels"};
  const bool own_files = std::any_of(std::begin(file_keys), std::end(file_keys), [&](const char* k) { return own.count(k) > 0; });
  if (own_files)
    for (const char* k : dataset_keys) m.erase(k);
  if (own.count("dataset"))
    for (const char* k : file_keys) m.erase(k);
  for (const auto& [k, v] : own) m[k] = v;
  return m;
}

const TopologyRelay& Topology::relay(const std::string& name) const {
  std::string known;
  for (const auto& r : relays) {
    if (r.name == name) return r;
    known += (known.empty() ? "" : ", ") + r.name;
  }
  throw InputError(source + ": no relay is named '" + name + "' (" +
                   (known.empty() ? "the file lists no [[relay]]" : "relays: " + known) + ")");
}

std::vector<NodeId> Topology::ids() const {
  std::vector<NodeId> v;
  v.reserve(nodes.size());
  for (const auto& n : nodes) v.push_back(n.id);
  std::sort(v.begin(), v.end());
  return v;
}

std::optional<std::string> read_public_key_file(const std::string& key_dir) {
  const fs::path file = fs::path(key_dir) / kNodePublicKeyFile;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) return std::nullopt;
  require_regular_file(file.string(), "public key file");
  // A key file is one short line; anything much longer is not a key and is not read whole.
  if (fs::file_size(file, ec) > 1024 || ec)
    throw InputError(file.string() + ": too large for a public key file (at most 1 KiB)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// A node's or relay's effective key: decoded from its inline text, and read from its key_dir
// where that holds node.pub (the two must agree).
void derive_key(const Topology& topology, const LoadOptions& options, const std::string& who, const std::string& text,
                const std::string& key_dir, std::optional<PublicKeyBytes>& key) {
  if (!text.empty()) {
    std::string why;
    key = decode_public_key(text, &why);
    if (!key) throw InputError(who + ": public_key is malformed: " + why);
  }
  if (!options.derive_keys || key_dir.empty() || !options.read_public_key) return;
  const std::string dir = topology.resolve(key_dir);
  const auto file_text = options.read_public_key(dir);
  if (!file_text) return;  // the keys live on the node's own machine; the inline key must do
  std::string why;
  const auto read = decode_public_key(*file_text, &why);
  const std::string file = (fs::path(dir) / kNodePublicKeyFile).string();
  if (!read) throw InputError(who + ": " + file + " does not hold a public key: " + why);
  if (key && *key != *read)
    throw InputError(who + ": public_key differs from the key in " + file + " (remove one, or regenerate the file's keys)");
  key = read;
}

}  // namespace

void derive_public_keys(Topology& topology, const LoadOptions& options) {
  for (auto& n : topology.nodes)
    derive_key(topology, options, topology.where(n.line) + ": " + topology.describe(n.id), n.public_key_text, n.key_dir,
               n.public_key);
  for (auto& r : topology.relays)
    derive_key(topology, options, topology.where(r.line) + ": relay '" + r.name + "'", r.public_key_text, r.key_dir,
               r.public_key);
}

Topology parse_topology(const std::string& text, const std::string& source_name, const std::string& base_dir,
                        const LoadOptions& options) {
  if (text.size() > kMaxTopologyFileBytes)
    throw InputError(source_name + ": a topology file is at most " + std::to_string(kMaxTopologyFileBytes) +
                     " bytes, this one has " + std::to_string(text.size()));
  Topology t = topo::parse_toml(text, source_name, base_dir);
  derive_public_keys(t, options);
  validate_topology(t, options.require_keys);
  return t;
}

Topology load_topology(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  require_regular_file(path, "topology file");
  const auto size = fs::file_size(path, ec);
  if (ec) throw InputError(path + ": cannot read its size: " + ec.message());
  if (size > kMaxTopologyFileBytes)
    throw InputError(path + ": a topology file is at most " + std::to_string(kMaxTopologyFileBytes) +
                     " bytes, this one has " + std::to_string(size));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  std::string base = fs::path(path).parent_path().string();
  return parse_topology(text.str(), path, base.empty() ? "." : base, options);
}

std::string run_name(const Topology& topology) {
  if (topology.federation.run) return *topology.federation.run;
  // The canonical text, not the file's bytes: comments and layout do not change the run, and a
  // topology built in memory has a name too.
  return "file:" + sha256_hex(to_toml(topology));
}

void print_topology(const Topology& topology, std::ostream& out) { out << to_toml(topology); }

void save_topology(const Topology& topology, const std::string& path, bool allow_missing_keys) {
  if (!allow_missing_keys)
    for (const auto& n : topology.nodes)
      if (!n.public_key)
        throw InputError("refusing to write " + path + ": " + topology.describe(n.id) +
                         " has no public key (generate keys first, or ask for a keyless file explicitly)");
  const std::string text = to_toml(topology);
  // Write beside the target and rename, so a reader never sees half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError("cannot open " + tmp + " for writing");
    out << text;
    out.flush();
    if (!out) throw InputError("failed writing " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw InputError("cannot move " + tmp + " to " + path + ": " + ec.message());
}

}  // namespace fednode
