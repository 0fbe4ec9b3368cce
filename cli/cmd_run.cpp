// fednode run: one node of a topology file, in this process (the LAN case: one per machine).
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/data_options.h"
#include "cli/method_options.h"
#include "crypto/key_files.h"
#include "node/node.h"
#include "topology/topology.h"

#include <atomic>
#include <csignal>
#include <ctime>
#include <iostream>
#include <set>
#include <tuple>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode run --topology FILE --id ID [--key-dir DIR] [--state-dir DIR] [--quiet]\n"
    "  Runs node ID (its id or name) of the topology FILE until it is finished. Its data, method\n"
    "  options and keys come from the file ([federation.data], [federation.options], key_dir);\n"
    "  what it receives and its result (result.json, head) go to its state directory. Killed\n"
    "  and started again with the same command, it continues where it was.\n"
    "  --key-dir DIR     the node's keys (fednode keygen), instead of the file's key_dir\n"
    "  --state-dir DIR   instead of the file's state_dir\n"
    "  --quiet           no progress lines on stderr\n"
    "  Threads: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS bound the node's compute threads.\n"
    "Exit status: 0 finished, 3 finished incomplete (a peer missed a deadline), 130 stopped by a\n"
    "signal, 1 error, 2 usage.\n";

// Lock-free, so a signal handler may set it; extraction (minutes at large inputs) reads it
// between batches, the loop below between steps.
std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);
// The running node, so that a signal reaches it inside a long merge or head fit as well.
std::atomic<Node*> g_node{nullptr};
void on_signal(int) {
  g_stop_requested.store(true);
  if (Node* node = g_node.load()) node->request_stop();
}

// [federation.data] and [federation.options] as the command line they stand for, so that they
// go through exactly the parser `fednode simulate` uses.
std::vector<std::string> as_arguments(const OptionMap& data, const OptionMap& options, const std::string& method) {
  std::vector<std::string> argv = {"--method", method};
  for (const auto* map : {&data, &options})
    for (const auto& [key, value] : *map) {
      if (method_flag_names().count(key)) {
        if (value == "true") argv.push_back("--" + key);
        else if (value != "false") throw UsageError("option '" + key + "' is a flag: give true or false, not '" + value + "'");
        continue;
      }
      argv.push_back("--" + key);
      argv.push_back(value);
    }
  return argv;
}

std::string timestamp() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(b, sizeof b, "%H:%M:%S", std::localtime(&t));
  return b;
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  const Args a(argv, {"topology", "id", "key-dir", "state-dir"}, {"quiet"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const Topology topology = load_topology(a.required("topology"));
  const TopologyNode& self = topology.lookup(a.required("id"));
  const bool quiet = a.flag("quiet");
  const std::string tag = "[" + (self.name.empty() ? "node " + std::to_string(self.id) : self.name) + "] ";
  auto say = [&](const std::string& m) {
    if (!quiet) std::cerr << timestamp() << " " << tag << m << std::endl;
  };

  std::set<std::string> data_names = data_option_names();
  data_names.insert(partition_option_names().begin(), partition_option_names().end());
  std::set<std::string> method_names = method_option_names();
  std::set<std::string> valued = data_names;
  valued.insert(method_names.begin(), method_names.end());
  method_names.insert(method_flag_names().begin(), method_flag_names().end());
  const OptionMap data = topology.data_for(self.id), options = topology.options_for(self.id);
  // Each table takes its own kind: a partition setting among a node's method options would
  // give that node another partition than its peers'.
  for (const auto& [map, names, table] :
       {std::tuple{&data, &data_names, "data settings"}, {&options, &method_names, "method options"}})
    for (const auto& kv : *map)
      if (!names->count(kv.first))
        throw InputError(topology.source + ": unknown option '" + kv.first + "' among the " + table + " of " +
                         topology.describe(self.id) +
                         (data_names.count(kv.first) ? " (a data setting: it belongs in [federation.data] or [node.data])"
                          : method_names.count(kv.first) ? " (a method setting: it belongs in [federation.options] or [node.options])"
                                                        : ""));
  OptionMap data_only = data;
  // Paths in a topology file are relative to the file (docs/topologies.md), not to where the
  // node happens to be started.
  for (const char* key : {"train-features", "train-labels", "test-features", "test-labels", "backbone"}) {
    auto it = data_only.find(key);
    if (it != data_only.end() && !(std::string(key) == "backbone" && it->second == "default"))
      it->second = topology.resolve(it->second);
  }
  if (!data_only.count("dataset") && !data_only.count("train-features"))
    throw InputError(topology.source + " gives " + topology.describe(self.id) +
                     " no data: set dataset = \"fashion-mnist\" or the four .npy files in [federation.data] "
                     "(fednode topology ... --data dataset=fashion-mnist)");
  const bool whole = data_only.count("partition") && data_only.at("partition") == "none";
  if (whole) data_only.erase("partition");
  // Settings come from the file, so a bad one is the file's mistake (exit 1), named with it.
  auto from_file = [&](auto&& parse) {
    try {
      return parse();
    } catch (const UsageError& e) {
      throw InputError(topology.source + ", settings of " + topology.describe(self.id) + ": " + e.what());
    }
  };
  const Args parsed = from_file(
      [&] { return Args(as_arguments(data_only, options, topology.federation.method), valued, method_flag_names()); });

  NodeConfig config;
  config.topology = topology;
  config.id = self.id;
  config.method = from_file([&] { return parse_method_options(parsed); });
  config.run_name = run_name(topology);
  config.state_dir = a.str("state-dir", "");
  config.callbacks.progress = say;

  say("loading data");
  LoadedData loaded;
  try {
    loaded = from_file([&] { return load_data(parsed, quiet, &g_stop_requested); });
  } catch (const Interrupted&) {
    say("stopped while extracting features; nothing was cached or stored, the same command starts again");
    return 130;
  }
  config.backbone_fingerprint = loaded.fingerprint;
  if (whole) {
    config.local = expand_features(std::move(loaded.train), loaded.expansion);
  } else {
    const PartitionOptions p = from_file([&] {
      return parse_partition_options(parsed, static_cast<int>(topology.nodes.size()), topology.federation.seed);
    });
    const Partition partition = make_partition(loaded.train.y, loaded.train.num_classes, p);
    const auto index = topology.partition_index(self.id);
    config.local = expand_features(loaded.train.subset(partition.at(static_cast<size_t>(index))), loaded.expansion);
  }
  config.test = expand_features(std::move(loaded.test), loaded.expansion);  // never empty (load_data)
  say("holds " + std::to_string(config.local.size()) + " samples");

  const std::string key_dir = a.has("key-dir") ? a.required("key-dir") : topology.key_dir_of(self.id);
  if (key_dir.empty()) throw InputError(topology.describe(self.id) + " has no key_dir; give --key-dir");
  Identity identity = load_identity(key_dir);

  if (g_stop_requested) return 130;  // stopped while loading: nothing to keep yet
  Node node(std::move(config), std::move(identity));
  g_node.store(&node);
  if (g_stop_requested) node.request_stop();  // a signal while the node was being made
  while (!node.step(std::chrono::milliseconds(200)))
    if (g_stop_requested) node.request_stop();
  g_node.store(nullptr);
  const NodeResult& r = node.result();
  say("result in " + node.state_dir() + "/result.json");
  switch (r.status) {
    case NodeStatus::Finished: return 0;
    case NodeStatus::Stopped: return 130;
    default: return 3;
  }
}

}  // namespace fednode::cli
