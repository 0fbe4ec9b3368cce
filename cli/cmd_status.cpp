// fednode status: every node of a topology file as its state directory shows it, on this machine.
#include "cli/commands.h"
#include "cli/status_view.h"
#include "core/options.h"

#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>
#include <unistd.h>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode status FILE [--watch] [--every SECONDS] [--format table|json]\n"
    "  Shows every node of the topology FILE from its state directory on this machine: its state\n"
    "  (not started, running, not responding, stopped, or its result's finished / incomplete),\n"
    "  the phase it is in, whom it still waits for and how long until it gives up on them, who\n"
    "  has not acknowledged its sends, its bytes, and the last line it said (or its result).\n"
    "  A running node rewrites status.json in its state directory every second; result.json\n"
    "  takes over when it ends (docs/cli.md, \"fednode status\").\n"
    "  --watch           redraw until every node has ended (Ctrl-C stops watching, not the nodes)\n"
    "  --every SECONDS   between redraws with --watch (default 1)\n"
    "  --format F        table (default) or json: one object per node, for scripts\n";

volatile std::sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

}  // namespace

int cmd_status(const std::vector<std::string>& argv) {
  std::vector<std::string> rest;
  const std::string file = split_positional(argv, {"--format", "--every"}, rest);
  const Args a(rest, {"format", "every"}, {"watch"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  if (file.empty()) throw UsageError("give the topology file whose nodes to show");
  const std::string format = a.str("format", "table");
  if (format != "table" && format != "json") throw UsageError("--format must be table or json, got '" + format + "'");
  const double every = a.real("every", 1.0, 0.1, 3600.0);
  const bool watch = a.flag("watch");
  LoadOptions o;
  o.require_keys = false;  // showing a node needs its state directory, not its keys
  const Topology topology = load_topology(file, o);
  const auto table = [&](const std::vector<NodeView>& views) {
    const std::string links = links_table(topology, views);
    return status_table(views) + (links.empty() ? "" : "\n" + links);
  };
  const auto show = [&](const std::vector<NodeView>& views) {
    std::cout << (format == "json" ? status_json(views) : table(views)) << std::flush;
  };
  if (!watch) {
    show(read_node_views(topology));
    return 0;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const bool terminal = ::isatty(1) && format == "table";
  std::string last;
  while (!g_interrupted) {
    const auto views = read_node_views(topology);
    const std::string text = format == "json" ? status_json(views) : table(views);
    // On a terminal the table is redrawn in place; otherwise a new copy only when it changed.
    if (terminal) std::cout << "\033[H\033[2J" << text << std::flush;
    else if (text != last) std::cout << text << (format == "table" ? "\n" : "") << std::flush;
    last = text;
    if (every_node_ended(views)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(every * 1000)));
  }
  return 0;
}

}  // namespace fednode::cli
