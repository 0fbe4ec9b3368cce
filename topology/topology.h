// A federation as data: its nodes (id, address, public key, data, state), the directed edges
// knowledge travels along, and the mode that gives those edges their one-shot meaning.
// File format, semantics and validation rules: docs/topologies.md.
#pragma once

#include "core/types.h"
#include "topology/public_key.h"

#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

enum class TopologyMode { Linear, Ring, Star, Graph };
const char* to_string(TopologyMode mode);
// Throws InputError naming the accepted modes.
TopologyMode parse_topology_mode(const std::string& s);

// What protects each hop's TCP connection besides the end-to-end sealing every message gets
// (docs/security.md): nothing more, or CurveZMQ with the nodes' own keys and a ZAP allow list.
// Every node of a federation must use the same setting, so it is the file's, not the node's.
// Auto, the default, is CurveZMQ as soon as one node listens beyond loopback (Topology::
// hop_encryption): without it any TCP client that reaches a node's port can make it hold
// unbounded memory below the socket (docs/security.md, "Memory a stranger can pin").
enum class HopEncryption { None, Curve, Auto };
const char* to_string(HopEncryption h);  // "none", "curve", "auto": the file's spelling
// Throws InputError naming the accepted values.
HopEncryption parse_hop_encryption(const std::string& s);

// Option and data settings travel as the text a user would give on the command line, so the
// node parses them with the same code as `fednode simulate` (names without the leading "--";
// booleans are "true"/"false").
using OptionMap = std::map<std::string, std::string>;

// Nodes in a linear, ring or star topology: what a file may list and `fednode simulate` may
// build (a star of 10 000 simulated nodes folds its leaves' statistics at the hub). It bounds the
// allocations a hostile file can cause; the file's size bound (below) holds them too.
constexpr size_t kMaxTopologyNodes = 16384;
// Nodes in graph mode, whose pairwise checks and planning are quadratic in the node count.
constexpr size_t kMaxGraphNodes = 1024;
// A topology file larger than this is refused before it is read.
constexpr size_t kMaxTopologyFileBytes = 4u << 20;
// Deadlines beyond a week are almost certainly a unit mistake (milliseconds given as seconds).
constexpr double kMaxDeadlineSeconds = 7 * 24 * 3600.0;
constexpr double kDefaultDeadlineSeconds = 300.0;
// How long a node that has done its work waits for its last acknowledgements, and a finished node
// for the receipts that say its own acknowledgements were recorded (docs/node.md, "Closing").
constexpr double kDefaultAckDeadlineSeconds = 60.0;
// A connection whose peer acknowledges nothing for this long — data it was sent, or keepalive
// probes while idle — is dropped and dialled again (docs/node.md, "Transport").
constexpr double kDefaultSilenceSeconds = 30.0;
// Senders whose knowledge a node awaits that may send it at once (docs/node.md, "Pacing").
constexpr int64_t kDefaultReceiveWindow = 8;
// The UDP port of LAN discovery's beacons (docs/lan.md, "Discovery"), the same at every node.
constexpr int64_t kDefaultDiscoveryPort = 7399;
// Relays a file may list, and an edge may name.
constexpr size_t kMaxRelays = 64;
// A run name is hashed into the run id; the bound only keeps names readable in logs.
constexpr size_t kMaxRunNameBytes = 128;

struct TopologyNode {
  NodeId id = 0;
  std::string name;            // optional, unique; letters, digits, '_', '-', '.'; not all digits
  std::string address;         // tcp://HOST:PORT, where peers reach this node; empty: found by discovery
  std::string bind;            // optional tcp://HOST:PORT it listens on (HOST may be *); default: address,
                               // or without one tcp://*:* (any port; discovery's beacons say which)
  std::string public_key_text; // as written in the file (hex or base64); may be empty
  std::optional<PublicKeyBytes> public_key;  // effective: decoded from the text or read from key_dir
  std::string key_dir;         // as written; holds node.pub and the node's secret key node.key
  std::string state_dir;       // as written; empty means state/n<id> next to the file
  std::optional<int64_t> partition_index;  // as written; see Topology::partition_index
  OptionMap options;           // per-node overrides of [federation.options]
  OptionMap data;              // per-node overrides of [federation.data]
  // false: the node accepts no connections (behind NAT or a firewall that lets only outgoing
  // ones through). It never listens; it dials each of its neighbours, which answer on that
  // connection, and a neighbour that cannot be reached either is joined through a relay
  // (docs/deployment.md).
  bool reachable = true;
  int line = 0;                // where the entry starts in its file; 0 when built in memory
  std::map<std::string, int> key_lines;  // where each key was written (empty when built in memory)
  // The line of `key`, else of the entry: where a message about that setting points.
  int line_of(const std::string& key) const {
    const auto it = key_lines.find(key);
    return it != key_lines.end() ? it->second : line;
  }
};

struct TopologyEdge {
  NodeId from = 0;
  NodeId to = 0;
  bool feedback = false;       // graph mode only: closes a cycle without being waited for
  int line = 0;
  // Relays (by name) that carry this edge's frames when both ends are unreachable, in order of
  // preference; empty: every relay of the file.
  std::vector<std::string> via;
};

// A relay ([[relay]], `fednode relay`): a process every node can reach that carries sealed frames
// between two nodes that cannot reach each other. It holds no key that opens them
// (docs/deployment.md, "Relays"); its own key pair only protects its hops (CurveZMQ).
struct TopologyRelay {
  std::string name;            // required, unique among relays; the charset of node names
  std::string address;         // required: tcp://HOST:PORT, where nodes reach it
  std::string bind;            // optional: what it listens on; default its address
  std::string public_key_text; // as written; may be empty
  std::optional<PublicKeyBytes> public_key;  // effective: decoded from the text or read from key_dir
  std::string key_dir;         // as written; holds node.pub and the relay's secret node.key
  int line = 0;
  std::map<std::string, int> key_lines;
  int line_of(const std::string& key) const {
    const auto it = key_lines.find(key);
    return it != key_lines.end() ? it->second : line;
  }
};

struct FederationSettings {
  TopologyMode mode = TopologyMode::Linear;
  std::string method;          // fedpft, fedcgs, fedtc, ... (the node checks the name)
  // Names the run: every node derives the run id from it (crypto's derive_run_id), so frames of
  // another run are refused. 1 to kMaxRunNameBytes printable ASCII characters; see run_name().
  std::optional<std::string> run;
  uint64_t seed = 0;
  double deadline_seconds = kDefaultDeadlineSeconds;
  double ack_deadline_seconds = kDefaultAckDeadlineSeconds;
  double silence_seconds = kDefaultSilenceSeconds;
  int64_t receive_window = kDefaultReceiveWindow;  // 0: no pacing
  int64_t discovery_port = kDefaultDiscoveryPort;  // UDP, for `fednode run --discover`
  HopEncryption hop_encryption = HopEncryption::Auto;  // as written; Topology::hop_encryption() resolves auto
  std::optional<NodeId> hub;   // star mode: required
  std::optional<NodeId> start; // ring mode: where the first pass begins (default: smallest id)
  OptionMap options;           // method options shared by every node
  OptionMap data;              // dataset and partition shared by every node
  // [federation.limits]: the protocol's limits by name (docs/protocol.md section 8), as text; the
  // node turns them into its Limits (node_config), the same at every node reading this file.
  OptionMap limits;
  int line = 0;
  std::map<std::string, int> key_lines;  // as TopologyNode::key_lines
  int line_of(const std::string& key) const {
    const auto it = key_lines.find(key);
    return it != key_lines.end() ? it->second : line;
  }
};

struct Topology {
  FederationSettings federation;
  std::vector<TopologyNode> nodes;
  std::vector<TopologyEdge> edges;
  std::vector<TopologyRelay> relays;
  std::string source = "<topology>";  // the file, for messages
  std::string base_dir = ".";         // relative paths in the file resolve against it

  const TopologyNode* find(NodeId id) const;
  // Throws InputError when no node has this id.
  const TopologyNode& node(NodeId id) const;
  // Accepts a decimal id or a node name, as `fednode run --id` does; throws InputError.
  const TopologyNode& lookup(const std::string& id_or_name) const;
  // "node 3" or "node 3 (hub)": how messages name a node.
  std::string describe(NodeId id) const;
  // "file.toml:12" (or just the file when line is 0): where messages point.
  std::string where(int line) const;
  // What every node uses on its hops: the file's setting, auto resolved to Curve when a node's
  // address or bind address is not on loopback (127.0.0.0/8, ::1, localhost), or a node has no
  // address (it is to be discovered on a network), else None.
  HopEncryption hop_encryption() const;
  // Whether some node's address or bind address is not on loopback, or some node has no address.
  bool beyond_loopback() const;

  // A path from the file, made usable from the current directory.
  std::string resolve(const std::string& path) const;
  std::string state_dir_of(NodeId id) const;   // resolved, with the default applied
  std::string key_dir_of(NodeId id) const;     // resolved; empty when the node has none
  // The part of the shared partition this node holds: as written, else the node's rank among
  // the ids in ascending order (so ids 0..N-1 hold parts 0..N-1, as in `fednode simulate`).
  int64_t partition_index(NodeId id) const;
  // [federation.options] with the node's overrides applied; likewise for data.
  OptionMap options_for(NodeId id) const;
  OptionMap data_for(NodeId id) const;

  // Ids in ascending order.
  std::vector<NodeId> ids() const;
  // Throws InputError naming the relays there are when none has this name.
  const TopologyRelay& relay(const std::string& name) const;
};

// Reads DIR/node.pub (kNodePublicKeyFile); returns nothing when the file does not exist.
// Replaceable so that the CLI can plug in the crypto layer's own reader.
using PublicKeyReader = std::function<std::optional<std::string>(const std::string& key_dir)>;
std::optional<std::string> read_public_key_file(const std::string& key_dir);

struct LoadOptions {
  // Every node must end up with a public key (inline or from its key_dir). Off only for tools
  // that inspect a file before keys exist.
  bool require_keys = true;
  // Fill in public keys from key_dir/node.pub where the file exists.
  bool derive_keys = true;
  PublicKeyReader read_public_key = read_public_key_file;
};

// The name the run id is derived from: [federation] run when set, otherwise "file:" and the
// SHA-256 (hex) of to_toml(topology). The default is the same for every node reading the same
// file, and changes whenever the federation does; it does not change between two runs of one
// file, which is why `fednode topology` writes a random `run` (docs/security.md, "New run, new
// run id").
std::string run_name(const Topology& topology);
// "" for an acceptable run name, else what is wrong with it, phrased to follow the name of
// where it came from ("[federation] run " + problem, "--run " + problem).
std::string run_name_problem(const std::string& run);

// Parse, derive keys, validate. Every error is an InputError naming the file, the line where
// known, and the node or edge concerned.
Topology load_topology(const std::string& path, const LoadOptions& options = {});
Topology parse_topology(const std::string& text, const std::string& source_name = "<string>",
                        const std::string& base_dir = ".", const LoadOptions& options = {});

// Fills in public keys from key directories (see LoadOptions). Already called by the loaders.
void derive_public_keys(Topology& topology, const LoadOptions& options);

// Checks everything docs/topologies.md lists under "Validation"; throws the first problem.
void validate_topology(const Topology& topology, bool require_keys = true);

// The TOML text of a topology; parsing it gives back an equal topology (public keys as written).
std::string to_toml(const Topology& topology);
void print_topology(const Topology& topology, std::ostream& out);
// Writes the file. Refuses a topology with a node lacking a public key unless allow_missing_keys.
void save_topology(const Topology& topology, const std::string& path, bool allow_missing_keys = false);

}  // namespace fednode
