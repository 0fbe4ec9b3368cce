// fednode relay: one relay of a topology file ([[relay]]), in this process (docs/deployment.md).
#include "cli/commands.h"
#include "cli/output_path.h"
#include "core/log.h"
#include "core/options.h"
#include "crypto/key_files.h"
#include "node/durable_file.h"
#include "node/node_config.h"
#include "node/relay.h"
#include "topology/topology.h"

#include <atomic>
#include <csignal>
#include <iostream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode relay --topology FILE --name NAME [--key-dir DIR] [--metrics FILE] [--quiet]\n"
    "  Runs relay NAME of the topology FILE ([[relay]]) until stopped (Ctrl-C, SIGTERM). Nodes that\n"
    "  cannot reach each other (both reachable = false) meet there: each dials it, and it hands\n"
    "  every frame to the other's connection. Frames stay sealed to their recipient; the relay\n"
    "  holds no key that opens them (docs/deployment.md, \"Relays\"). Under CurveZMQ (the default\n"
    "  beyond loopback) it admits only the file's node keys, and carries a frame only on a circuit\n"
    "  named for the key that sent it.\n"
    "  --key-dir DIR     the relay's keys (fednode keygen), instead of the file's key_dir\n"
    "  --metrics FILE    keep Prometheus metrics in FILE, rewritten about once a second\n"
    "  --quiet           no lines on stderr\n"
    "Exit status: 0 stopped by a signal; 5 an address this machine cannot listen on; 1 any other\n"
    "  error; 2 usage.\n";

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

}  // namespace

int cmd_relay(const std::vector<std::string>& argv) {
  const Args a(argv, {"topology", "name", "key-dir", "metrics"}, {"quiet"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const Topology topology = load_topology(a.required("topology"));
  const TopologyRelay& self = topology.relay(a.required("name"));
  const bool quiet = a.flag("quiet");
  const std::string metrics = output_path_option(a, "metrics");
  const auto say = [&](const std::string& line) {
    if (!quiet) std::cerr << "[relay " << self.name << "] " << line << std::endl;
  };

  RelayOptions options;
  options.bind = self.bind.empty() ? self.address : self.bind;
  options.max_message_bytes = limits_of(topology).max_message_bytes;
  options.silence_ms = static_cast<int>(topology.federation.silence_seconds * 1000);
  options.log = say;
  for (NodeId id : topology.ids()) options.nodes.insert(id);
  if (topology.hop_encryption() == HopEncryption::Curve) {
    const std::string key_dir = a.has("key-dir") ? a.required("key-dir") : topology.resolve(self.key_dir);
    if (key_dir.empty()) throw InputError(topology.source + ": relay '" + self.name + "' has no key_dir; give --key-dir");
    options.keys = std::make_shared<const CurveKeyPair>(load_identity(key_dir));
    options.allowed = peer_keys(topology);
  }
  Relay relay(options);
  say("listening on " + options.bind + (options.keys ? ", CurveZMQ, admitting the " + std::to_string(options.allowed.size()) +
                                                           " node keys of " + topology.source
                                                     : ", plain TCP"));
  auto last = std::chrono::steady_clock::now();
  RelayCounters said;
  while (!g_stop.load()) {
    relay.step(std::chrono::milliseconds(200));
    if (std::chrono::steady_clock::now() - last < std::chrono::seconds(1)) continue;
    last = std::chrono::steady_clock::now();
    const RelayCounters c = relay.counters();
    if (!metrics.empty()) write_file_durably(metrics, relay_metrics(self.name, c));
    if (c.frames == said.frames && c.refused == said.refused && c.dropped == said.dropped) continue;
    say(std::to_string(c.frames) + " frames (" + std::to_string(c.bytes) + " bytes) carried on " +
        std::to_string(c.circuits) + " circuits; " + std::to_string(c.refused) + " refused, " +
        std::to_string(c.dropped) + " dropped, " + std::to_string(c.held_bytes) + " bytes waiting");
    said = c;
  }
  say("stopped");
  return 0;
}

}  // namespace fednode::cli
