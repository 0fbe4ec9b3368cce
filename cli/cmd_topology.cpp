// fednode topology: a ready topology file (docs/topologies.md, "Builders") with a key pair per
// node, so that a federation on one machine is one command away from running.
#include "core/options.h"
#include "cli/commands.h"
#include "features/data_options.h"
#include "methods/method_options.h"
#include "crypto/key_files.h"
#include "methods/registry.h"
#include "node/secure_channel.h"
#include "topology/builders.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <set>

namespace fednode::cli {
namespace {

namespace fs = std::filesystem;

const char* kHelp =
    "usage: fednode topology linear|ring|star|graph --nodes N [--out FILE] [--method M]\n"
    "       [--base-port P] [--host H] [--seed S] [--deadline SECONDS] [--ack-deadline SECONDS]\n"
    "       [--silence SECONDS] [--receive-window N] [--run NAME]\n"
    "       [--keys DIR] [--state DIR] [--hop-encryption auto|none|curve] [--option K=V]... [--data K=V]...\n"
    "writes a topology file (docs/topologies.md) for nodes 0..N-1 named n0.. and a key pair per\n"
    "node in DIR/n<i> (fednode keygen's node.key and node.pub); the file names the key\n"
    "directories, and loading it reads each node's public key from there.\n"
    "  linear   n0 -> n1 -> ... ; ring: the same closed back to n0, starting at n0\n"
    "  star     n0 is the hub, every other node a leaf; graph: the diamond for N = 4, otherwise a\n"
    "           random connected DAG drawn from --seed\n"
    "  --nodes N              1 to 16384, 1024 in graph mode (ring and star: at least 2)\n"
    "  --out FILE             where to write (never overwritten; default: stdout)\n"
    "  --method M             one of the methods below (default fedpft)\n"
    "  --base-port P          node i is tcp://H:(P+i) (default 7000)\n"
    "  --host H               (default 127.0.0.1)\n"
    "  --no-addresses         no address for any node: they find each other by LAN discovery\n"
    "                         (fednode run --discover; launch --discover), any free port each\n"
    "  --nat IDS              these nodes accept no connections (NAT, firewall): reachable = false,\n"
    "                         no address; they dial out (docs/deployment.md). IDS: 0,3,4 or all\n"
    "  --relay tcp://H:P      a relay, r1, with a key pair in the keys directory (r1/), where two\n"
    "                         --nat nodes meet (fednode relay; launch starts it)\n"
    "  --seed S               the federation's seed (default 0)\n"
    "  --deadline SECONDS     how long a node waits for each phase's inputs (default 300)\n"
    "  --ack-deadline SECONDS how long a node that has done its work waits for its last\n"
    "                         acknowledgements, and for the receipts of its own (default 60)\n"
    "  --silence SECONDS      a connection whose peer acknowledges nothing for this long is\n"
    "                         dropped and dialled again; a slow transfer that moves is not\n"
    "                         (default 30, at least 1)\n"
    "  --receive-window N     how many senders a node waits for may send it their knowledge at\n"
    "                         once; the others wait for their turn (default 8; 0: all at once)\n"
    "  --run NAME             the run name the run id is derived from, 1 to 128 printable ASCII\n"
    "                         characters (default: run- and 16 random hex digits, new every time)\n"
    "  --keys DIR             key directories DIR/n<i> (default: keys/ beside the output file);\n"
    "                         a directory that already holds node.key is reused, not overwritten\n"
    "  --state DIR            state directories DIR/n<i> (default: state/ beside the output file)\n"
    "  --hop-encryption E     curve: CurveZMQ on every connection besides the end-to-end sealing,\n"
    "                         with the same keys (docs/security.md, layer 2); none; or auto (the\n"
    "                         default): curve when --host is not loopback, none on 127.0.0.1\n"
    "  --option K=V           a method option for every node, as `fednode simulate --K V` would take\n"
    "                         it (flags: --option dp=true); repeat for more\n"
    "  --data K=V             a dataset or partition setting for every node, e.g.\n"
    "                         --data dataset=fashion-mnist --data partition=dirichlet; repeatable\n"
    "Paths given here are relative to the current directory; the file stores them relative to\n"
    "its own directory, as topology files do.\n"
    "fednode topology FILE --dot|--svg [--out F] draws an existing file instead\n"
    "(fednode topology FILE --help).\n";

// --option and --data: repeated KEY=VALUE texts, each key at most once.
OptionMap key_values(const Args& a, const std::string& option) {
  OptionMap m;
  for (const std::string& kv : a.all(option)) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--" + option + " expects KEY=VALUE, got '" + kv + "'");
    const std::string key = kv.substr(0, eq);
    if (!m.emplace(key, kv.substr(eq + 1)).second) throw UsageError("--" + option + " " + key + " given twice");
  }
  return m;
}

// The nodes will parse these with the same code as `fednode simulate`; checking them here with
// that code makes a typo fail once, now, instead of on every node at start-up.
void check_method_options(const std::string& method, const OptionMap& options) {
  std::vector<std::string> argv = {"--method", method};
  for (const auto& [key, value] : options) {
    if (key == "method") throw UsageError("--option method: give the method with --method");
    if (method_flag_names().count(key)) {
      if (value != "true" && value != "false")
        throw UsageError("--option " + key + " is a flag: its value is true or false, got '" + value + "'");
      if (value == "true") argv.push_back("--" + key);
    } else if (method_option_names().count(key)) {
      argv.push_back("--" + key);
      argv.push_back(value);
    } else {
      throw UsageError("--option " + key + " is not a method option ('fednode simulate --help' lists them)");
    }
  }
  try {
    parse_method_options(Args(argv, method_option_names(), method_flag_names()));
  } catch (const UsageError& e) {
    throw UsageError(std::string("--option: ") + e.what());
  } catch (const InputError& e) {
    throw UsageError(std::string("--option: ") + e.what());
  }
}

// A path from the command line (relative to the current directory) as the file must name it:
// relative to the file's own directory, against which loaders resolve it.
std::string as_named_in_file(const std::string& dir, const fs::path& file_dir, const std::string& option) {
  if (dir.empty()) throw UsageError("--" + option + " needs a path, got an empty one");
  const fs::path p(dir);
  if (p.is_absolute()) return p.lexically_normal().string();
  const fs::path base = fs::absolute(file_dir).lexically_normal();
  return fs::absolute(p).lexically_normal().lexically_proximate(base).string();
}

// [federation.data] as the nodes will read it: names and values checked with the parser they
// use (what needs the files themselves is checked when a node loads them), and file paths
// rewritten relative to the file, against which the nodes resolve them.
OptionMap checked_data(OptionMap data, const fs::path& file_dir, int nodes, uint64_t seed) {
  std::set<std::string> valued = data_option_names();
  valued.insert(partition_option_names().begin(), partition_option_names().end());
  std::vector<std::string> argv;
  for (auto& [key, value] : data) {
    if (!valued.count(key))
      throw UsageError("--data " + key + " is not a data or partition option (they are listed by 'fednode simulate --help')");
    const bool path = key == "train-features" || key == "train-labels" || key == "test-features" ||
                      key == "test-labels" || (key == "backbone" && value != "default");
    if (path) {
      if (value.empty()) throw UsageError("--data " + key + " needs a file, got an empty path");
      value = as_named_in_file(value, file_dir, "data " + key);
    }
    if (key == "partition" && value == "none") continue;  // every node takes the whole set
    argv.push_back("--" + key);
    argv.push_back(value);
  }
  if (data.empty()) return data;
  try {
    const Args parsed(argv, valued, {});
    parse_data_settings(parsed, /*need_source=*/false);
    parse_partition_options(parsed, nodes, seed);
  } catch (const std::exception& e) {  // UsageError or InputError alike: the command line's mistake
    throw UsageError(std::string("--data: ") + e.what());
  }
  return data;
}

// Makes the key pair of one node, or reuses the one its directory holds. Returns "" either way:
// the file names the directory, and loading it reads node.pub from there.
std::string ensure_key_pair(const std::string& dir, int& generated, int& reused) {
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / kSecretKeyFile, ec)) {
    write_new_identity(dir);  // refuses, naming the file, if a stray node.pub is in the way
    ++generated;
    return "";
  }
  // Reused only if whole: the secret key readable by its owner alone and node.pub its match.
  load_identity(dir);
  if (!fs::exists(fs::path(dir) / kPublicKeyFile, ec))
    throw InputError(dir + " holds " + kSecretKeyFile + " but no " + kPublicKeyFile +
                     "; restore it, or move the directory away to generate a new key pair");
  ++reused;
  return "";
}

// --nat and --relay: the nodes that accept no connections, and where they meet. Without
// `generated` (the first, keyless build), checks everything and makes no key.
void behind_nat(Topology& t, const Args& a, const std::string& key_root, int* generated = nullptr,
                int* reused = nullptr) {
  if (a.has("relay") && !a.has("nat")) throw UsageError("--relay is where --nat nodes meet: give --nat too");
  if (!a.has("nat")) return;
  const std::string list = a.required("nat");
  std::set<NodeId> hidden;
  if (list == "all") {
    for (const auto& n : t.nodes) hidden.insert(n.id);
  } else {
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string item = list.substr(at, comma - at);
      if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 10 ||
          !t.find(static_cast<NodeId>(std::stoull(item))))
        throw UsageError("--nat: '" + item + "' is not a node id of this topology (give ids such as 0,3,4, or all)");
      hidden.insert(static_cast<NodeId>(std::stoull(item)));
      at = comma + 1;
    }
  }
  for (auto& n : t.nodes)
    if (hidden.count(n.id)) {
      n.reachable = false;
      n.address.clear();
      n.bind.clear();
    }
  if (a.has("relay")) {
    TopologyRelay r;
    r.name = "r1";
    r.address = a.required("relay");
    r.key_dir = (fs::path(key_root) / "r1").string();
    if (generated) ensure_key_pair(t.resolve(r.key_dir), *generated, *reused);
    t.relays.push_back(r);
    if (generated) derive_public_keys(t, LoadOptions{});
  }
  for (const auto& e : t.edges)
    if (hidden.count(e.from) && hidden.count(e.to) && t.relays.empty())
      throw UsageError("--nat: nodes " + std::to_string(e.from) + " and " + std::to_string(e.to) +
                       " exchange messages and neither accepts connections: give --relay tcp://HOST:PORT, where "
                       "they meet");
  try {
    validate_topology(t, /*require_keys=*/generated != nullptr);
  } catch (const InputError& e) {
    throw UsageError(std::string("--nat/--relay: ") + e.what());
  }
}

}  // namespace

int cmd_topology(const std::vector<std::string>& argv) {
  // The mode comes first, as a word; everything after it is an option. Any other first word is
  // a file to draw (cmd_topology_draw.cpp), so the generator's command lines keep their meaning.
  const bool has_mode = !argv.empty() && argv[0].rfind("-", 0) != 0;
  const bool drawing = std::find(argv.begin(), argv.end(), "--dot") != argv.end() ||
                       std::find(argv.begin(), argv.end(), "--svg") != argv.end();
  if (has_mode && is_topology_mode_word(argv[0]) && drawing)
    throw UsageError("--dot and --svg draw an existing file (fednode topology FILE --dot); '" + argv[0] +
                     "' is a mode name: write ./" + argv[0] + " for a file of that name");
  if (drawing || (has_mode && !is_topology_mode_word(argv[0]) && std::filesystem::is_regular_file(argv[0])))
    return cmd_topology_draw(argv);
  const Args a(has_mode ? std::vector<std::string>(argv.begin() + 1, argv.end()) : argv,
               {"nodes", "out", "method", "base-port", "host", "seed", "deadline", "ack-deadline", "silence", "receive-window", "run", "keys", "state",
                "hop-encryption", "nat", "relay"}, {"no-addresses"},
               {"option", "data"});
  if (a.help()) {
    std::cout << kHelp << "methods: " << method_names() << "\n";
    return 0;
  }
  if (!has_mode)
    throw UsageError("name the topology first: fednode topology linear|ring|star|graph --nodes N (or draw a file: "
                     "fednode topology FILE --dot)");

  TopologyBuildOptions o;
  try {
    o.mode = parse_topology_mode(argv[0]);
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }
  const std::string mode = to_string(o.mode);
  if (!a.has("nodes")) throw UsageError("missing required option --nodes");
  o.nodes = static_cast<int>(a.integer("nodes", 0, 1, kMaxTopologyNodes));
  if ((o.mode == TopologyMode::Ring || o.mode == TopologyMode::Star) && o.nodes < 2)
    throw UsageError("--nodes: a " + mode + " needs at least 2 nodes, got " + std::to_string(o.nodes));
  o.base_port = static_cast<int>(a.integer("base-port", o.base_port, 1, 65535));
  if (o.base_port + o.nodes - 1 > 65535)
    throw UsageError("--base-port " + std::to_string(o.base_port) + ": the ports of " + std::to_string(o.nodes) +
                     " nodes would run past 65535");
  o.addresses = !a.flag("no-addresses");
  if (!o.addresses && (a.has("host") || a.has("base-port")))
    throw UsageError("--no-addresses leaves --host and --base-port nothing to set");
  o.host = a.str("host", o.host);
  if (o.host.empty()) throw UsageError("--host is empty");
  o.method = a.str("method", "fedpft");
  if (!find_method(o.method)) throw UsageError("--method must be " + method_names() + ", got '" + o.method + "'");
  o.seed = static_cast<uint64_t>(a.integer("seed", 0, 0, INT64_MAX));
  o.deadline_seconds = a.real("deadline", kDefaultDeadlineSeconds, 1e-3, kMaxDeadlineSeconds);
  o.ack_deadline_seconds = a.real("ack-deadline", kDefaultAckDeadlineSeconds, 1e-3, kMaxDeadlineSeconds);
  o.silence_seconds = a.real("silence", kDefaultSilenceSeconds, 1, kMaxDeadlineSeconds);
  o.receive_window = a.integer("receive-window", kDefaultReceiveWindow, 0, kMaxTopologyNodes);
  o.run = a.has("run") ? a.str("run", "") : random_run_name();
  const std::string run_problem = run_name_problem(o.run);
  if (!run_problem.empty()) throw UsageError("--run " + run_problem);
  try {
    o.hop_encryption = parse_hop_encryption(a.str("hop-encryption", "auto"));
  } catch (const InputError& e) {
    throw UsageError(std::string("--hop-encryption: ") + e.what());
  }
  o.options = key_values(a, "option");
  check_method_options(o.method, o.options);

  const std::string out = a.str("out", "");
  if (a.has("out") && out.empty()) throw UsageError("--out needs a file name, got an empty path");
  fs::path file_dir = fs::path(out).parent_path();
  if (file_dir.empty()) file_dir = ".";
  o.data = checked_data(key_values(a, "data"), file_dir, o.nodes, o.seed);
  for (const std::string& key : method_named(o.method).path_options)
    if (auto it = o.options.find(key); it != o.options.end()) it->second = as_named_in_file(it->second, file_dir, "option " + key);
  o.base_dir = file_dir.string();
  if (a.has("keys")) o.key_root = as_named_in_file(a.str("keys", ""), file_dir, "keys");
  else o.key_root = "keys";
  if (a.has("state")) o.state_root = as_named_in_file(a.str("state", ""), file_dir, "state");

  std::error_code ec;
  if (!out.empty() && fs::exists(fs::symlink_status(out, ec)))
    throw InputError(out + " already exists; refusing to overwrite a topology file");
  // A first build without keys checks every argument (host, option names, ...) before any key
  // is written, so a mistake leaves no stray key directories behind.
  try {
    Topology keyless = build_topology(o);
    behind_nat(keyless, a, o.key_root);
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }

  int generated = 0, reused = 0;
  o.public_key = [&](const TopologyNode&, const std::string& dir) { return ensure_key_pair(dir, generated, reused); };
  Topology t = build_topology(o);
  behind_nat(t, a, o.key_root, &generated, &reused);
  if (out.empty()) {
    std::cout << to_toml(t);
  } else {
    fs::create_directories(file_dir, ec);
    if (ec) throw InputError("cannot create the directory " + file_dir.string() + ": " + ec.message());
    save_topology(t, out);
    std::cout << "wrote " << out << ": " << mode << " of " << o.nodes << " nodes, " << o.method << ", run "
              << run_name(t) << "\n";
  }
  // stderr: with no --out, stdout is the file itself.
  if (o.data.empty())
    std::cerr << "no --data: give the nodes their data in the file's [federation.data] (e.g. dataset = "
                 "\"fashion-mnist\") before running them, or make the file again with --data dataset=fashion-mnist\n";
  std::cerr << "key pairs in " << t.resolve(o.key_root) << "/n<i>: " << generated << " new, " << reused
            << " reused\n";
  return 0;
}

}  // namespace fednode::cli
