// fednode run: one node of a topology file, in this process (the LAN case: one per machine).
#include "cli/commands.h"
#include "cli/exit_status.h"
#include "cli/output_path.h"
#include "core/log.h"
#include "core/options.h"
#include "crypto/key_files.h"
#include "features/allocator.h"
#include "node/node.h"
#include "node/node_config.h"
#include "topology/topology.h"

#include <atomic>
#include <csignal>
#include <ctime>
#include <iostream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode run --topology FILE --id ID [--key-dir DIR] [--state-dir DIR] [--metrics FILE]\n"
    "                   [--discover [--discover-on IFACE[,IFACE...]]] [--quiet]\n"
    "  Runs node ID (its id or name) of the topology FILE until it is finished. Its data, method\n"
    "  options and keys come from the file ([federation.data], [federation.options], key_dir);\n"
    "  what it receives and its result (result.json, head) go to its state directory. Killed\n"
    "  and started again with the same command, it continues where it was.\n"
    "  --key-dir DIR     the node's keys (fednode keygen), instead of the file's key_dir\n"
    "  --state-dir DIR   instead of the file's state_dir\n"
    "  --metrics FILE    keep Prometheus metrics in FILE (text format, for node_exporter's textfile\n"
    "                    collector: name it *.prom in its directory), rewritten about once a second\n"
    "  --discover        find the peers the file gives no address on the local network: UDP\n"
    "                    beacons on [federation] discovery_port (default 7399), each address\n"
    "                    trusted only once the CurveZMQ handshake proves the topology's key for\n"
    "                    that node (docs/lan.md, \"Discovery\"); addresses in the file still win\n"
    "  --discover-on IFACE,...  beacon on these interfaces only (default: every IPv4 one that is up)\n"
    "  --quiet           no progress lines on stderr\n"
    "  FEDNODE_LOG_LEVEL=error|warning|info|debug  which lines to write (default info; warnings\n"
    "                    start with \"warning: \")\n"
    "  Threads: OMP_NUM_THREADS and OPENBLAS_NUM_THREADS bound the node's compute threads.\n"
    "Exit status: 0 finished; 3 incomplete because a deadline passed (a peer sent nothing in time,\n"
    "  or a message was never acknowledged); 4 incomplete because a peer refused this node's\n"
    "  message or its knowledge could not be merged; 5 an address this machine cannot listen on;\n"
    "  130 stopped by a signal; 1 any other error (the message says which); 2 usage (docs/cli.md).\n";

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

std::string timestamp() {
  char b[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(b, sizeof b, "%H:%M:%S", std::localtime(&t));
  return b;
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  const Args a(argv, {"topology", "id", "key-dir", "state-dir", "metrics", "discover-on"},
               {"quiet", "discover"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const Topology topology = load_topology(a.required("topology"));
  const TopologyNode& self = topology.lookup(a.required("id"));
  const LogLevel level = log_level_from_environment();
  const bool quiet = a.flag("quiet");
  const std::string tag = "[" + (self.name.empty() ? "node " + std::to_string(self.id) : self.name) + "] ";
  auto log = [&](LogLevel l, const std::string& m) {
    if (quiet || l > level) return;
    std::cerr << timestamp() << " " << tag << (l == LogLevel::Warning ? "warning: " : "") << m << std::endl;
  };
  auto say = [&](const std::string& m) { log(LogLevel::Info, m); };

  NodeSetup setup;
  setup.quiet = quiet;
  setup.stop = &g_stop_requested;
  setup.progress = say;
  NodeConfig config;
  try {
    config = node_config(topology, a.required("id"), setup);
  } catch (const Interrupted&) {
    say("stopped while extracting features; nothing was cached or stored, the same command starts again");
    return kExitStopped;
  }
  release_freed_memory();  // what loading the data left on the heap (features/allocator.h)
  config.state_dir = a.str("state-dir", "");
  config.metrics_path = output_path_option(a, "metrics");
  config.discover = a.flag("discover");
  if (a.has("discover-on")) {
    if (!config.discover) throw UsageError("--discover-on is for --discover");
    std::string list = a.required("discover-on");
    for (size_t start = 0; start <= list.size();) {
      const size_t comma = std::min(list.find(',', start), list.size());
      if (comma == start) throw UsageError("--discover-on: an empty interface name in '" + list + "'");
      config.discovery_interfaces.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  config.callbacks.log = log;
  config.log_level = level;

  const std::string key_dir = a.has("key-dir") ? a.required("key-dir") : topology.key_dir_of(self.id);
  if (key_dir.empty()) throw InputError(topology.describe(self.id) + " has no key_dir; give --key-dir");
  Identity identity = load_identity(key_dir);

  if (g_stop_requested) return kExitStopped;  // stopped while loading: nothing to keep yet
  Node node(std::move(config), std::move(identity));
  g_node.store(&node);
  if (g_stop_requested) node.request_stop();  // a signal while the node was being made
  while (!node.step(std::chrono::milliseconds(200)))
    if (g_stop_requested) node.request_stop();
  g_node.store(nullptr);
  const NodeResult& r = node.result();
  say("result in " + node.state_dir() + "/result.json");
  return exit_status_of(r);
}

}  // namespace fednode::cli
