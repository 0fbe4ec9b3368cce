// fednode launch: every node of a topology file on this machine, each its own `fednode run`
// process, with progress, one result table and an exit status that says whether all finished.
#include "core/log.h"
#include "core/options.h"
#include "cli/commands.h"
#include "cli/exit_status.h"
#include "cli/launch_report.h"
#include "cli/output_path.h"
#include "node/durable_file.h"
#include "cli/status_view.h"
#include "crypto/key_files.h"
#include "topology/topology.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode launch FILE [--threads N] [--timeout SECONDS] [--metrics-dir DIR] [--report FILE]\n"
    "                      [--discover] [--quiet]\n"
    "  Starts every node of the topology FILE as a separate 'fednode run' process on this\n"
    "  machine, shows their progress, and prints one table (node, status, contributors,\n"
    "  accuracy, bytes) from their result.json files. Each node's output goes to node.log in\n"
    "  its state directory. The file's relays ([[relay]]) run too, as 'fednode relay', from\n"
    "  before the first node starts until the last one ends (logs: relay-NAME.log beside FILE).\n"
    "  --threads N        compute threads per node (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS; default 1)\n"
    "  --timeout SECONDS  stop every node still running after this long (default: none)\n"
    "  --metrics-dir DIR  each node keeps Prometheus metrics in DIR/fednode-NAME.prom (fednode run\n"
    "                     --metrics): point node_exporter's textfile collector at DIR\n"
    "  --report FILE      once every node ended, a report from their result.json files in the\n"
    "                     layout of 'fednode simulate --report', for 'fednode report FILE --html'\n"
    "  --discover         nodes the file gives no address find each other by discovery over\n"
    "                     loopback ('fednode run --discover --discover-on lo'): nothing leaves\n"
    "                     this machine\n"
    "  --quiet            no progress lines; only the table\n"
    "  FEDNODE_LOG_LEVEL  passed to every node (their node.log); below info, as --quiet here\n"
    "  A node whose key_dir holds no key pair gets a new one there (every node runs on this\n"
    "  machine, so its public key is read from the same place); launch says which it made.\n"
    "Exit status: 0 when every node's result.json says finished (also one run again by hand\n"
    "after its process here was stopped); otherwise the exit status of the first node, in the\n"
    "file's order, that did not finish (3 deadline, 4 refused, 5 network, 130 stopped, 1 error;\n"
    "'fednode run --help'), or 1 if its process left none; 2 for a usage error (docs/cli.md).\n";

volatile std::sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

struct Child {
  NodeId id = 0;
  std::string label;
  std::string state_dir;
  pid_t pid = -1;
  int exit_code = -1;
  bool running = false;
};

std::string self_executable() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw InputError("cannot find the fednode executable (/proc/self/exe): " + ec.message());
  return p.string();
}

// Starts `args` (args[0] the executable) with its output appended to `log`.
pid_t spawn_process(const std::vector<std::string>& args, const std::string& log, int threads) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError("cannot open '" + log + "': " + std::strerror(errno));
  const std::string t = std::to_string(threads);
  // Made before fork: the child only calls what is safe there.
  std::vector<const char*> argv;
  for (const auto& arg : args) argv.push_back(arg.c_str());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw InputError(std::string("cannot start a process: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setenv("OMP_NUM_THREADS", t.c_str(), 1);
    ::setenv("OPENBLAS_NUM_THREADS", t.c_str(), 1);
    std::signal(SIGINT, SIG_IGN);  // the launcher decides when its nodes stop
    ::execv(argv[0], const_cast<char* const*>(argv.data()));
    std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

pid_t spawn(const std::string& exe, const std::string& topology_file, const Child& c, int threads,
            const std::string& metrics_dir, bool discover) {
  std::vector<std::string> args = {exe, "run", "--topology", topology_file, "--id", std::to_string(c.id)};
  if (!metrics_dir.empty()) args.insert(args.end(), {"--metrics", metrics_dir + "/fednode-" + c.label + ".prom"});
  if (discover) args.insert(args.end(), {"--discover", "--discover-on", "lo"});
  return spawn_process(args, c.state_dir + "/node.log", threads);
}

// The file's relays, each as `fednode relay`, logging to relay-NAME.log beside the file: started
// before the nodes, stopped (SIGTERM) once they are done.
std::vector<pid_t> spawn_relays(const std::string& exe, const Topology& topology, const std::string& topology_file,
                                const std::string& metrics_dir, bool quiet) {
  std::vector<pid_t> pids;
  for (const auto& r : topology.relays) {
    std::vector<std::string> args = {exe, "relay", "--topology", topology_file, "--name", r.name};
    if (!metrics_dir.empty()) args.insert(args.end(), {"--metrics", metrics_dir + "/fednode-relay-" + r.name + ".prom"});
    const std::string log = (fs::path(topology_file).parent_path() / ("relay-" + r.name + ".log")).string();
    pids.push_back(spawn_process(args, log, 1));
    if (!quiet) std::cerr << "relay " << r.name << " started; its log: " << log << "\n";
  }
  return pids;
}

void stop_relays(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) ::kill(pid, SIGTERM);
  for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
}

// The row of the result table for a node's result.json: its fields as written, "" for one that
// is absent. A file that is not a JSON object is an unreadable result: `error` says why, naming
// the file.
struct ResultRow {
  std::string status, contributors, accuracy, bytes_sent, bytes_received, error;
};

// A field's value as text: a string without its quotes, anything else as JSON ("null", 12345).
std::string field_text(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// The ids of a JSON array, compacted ("0-3,5").
std::string compact_ids(const nlohmann::json& list) {
  std::vector<long> ids;
  if (list.is_array())
    for (const auto& v : list)
      if (v.is_number_integer()) ids.push_back(v.get<long>());
  return cli::compact_ids(ids);
}

ResultRow read_result_row(std::istream& in, const std::string& path) {
  const auto unreadable = [&](const std::string& why) {
    return ResultRow{"unreadable result", "-", "-", "-", "-", path + why};
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return unreadable(" is not valid JSON: " + std::string(e.what()));
  }
  if (!j.is_object()) return unreadable(" is not a JSON object");
  ResultRow row;
  row.status = field_text(j, "status");
  const auto contributors = j.find("contributors");
  row.contributors = compact_ids(contributors == j.end() ? nlohmann::json() : *contributors);
  row.accuracy = field_text(j, "accuracy");
  const auto acc = j.find("accuracy");
  if (acc != j.end() && acc->is_number()) {
    char a[32];
    std::snprintf(a, sizeof a, "%.4f", acc->get<double>());
    row.accuracy = a;
  }
  row.bytes_sent = field_text(j, "bytes_sent");
  row.bytes_received = field_text(j, "bytes_received");
  return row;
}

// The nodes' status (cli/status_view.h) while they run: on a terminal one table redrawn in place
// every second; otherwise (a log, a pipe) plain lines, a new table when a node's state, phase,
// awaited senders or unacknowledged peers changed, at most every 5 s, so that a large star's
// log does not get a table per arriving leaf.
class LiveTable {
 public:
  explicit LiveTable(bool terminal) : terminal_(terminal) {}
  void show(const std::vector<NodeView>& views, int elapsed_s) {
    const std::string table = status_table(views);
    if (terminal_) {
      if (lines_ > 0) std::cerr << "\033[" << lines_ << "F\033[J";  // back to the table's first line, clear below
      std::cerr << elapsed_s << " s\n" << table << std::flush;
      lines_ = 1 + static_cast<int>(std::count(table.begin(), table.end(), '\n'));
      return;
    }
    std::string shape;
    for (const auto& v : views) {
      shape += v.label + ' ' + v.state + ' ' + v.stage + ';';
      for (long id : v.awaiting) shape += std::to_string(id) + ',';
      shape += ';';
      for (long id : v.unacknowledged) shape += std::to_string(id) + ',';
      shape += '\n';
    }
    if (shape == shape_ || (printed_ && elapsed_s - printed_at_ < 5)) return;
    shape_ = shape;
    printed_ = true;
    printed_at_ = elapsed_s;
    std::cerr << elapsed_s << " s\n" << table << std::flush;
  }
  // Output from elsewhere (a node exited) went below the table: redraw under it, not over it.
  void interrupted() { lines_ = 0; }

 private:
  bool terminal_;
  int lines_ = 0;
  std::string shape_;
  bool printed_ = false;
  int printed_at_ = 0;
};

// Every node of a local launch runs here, so a node whose key_dir has no key pair yet (the
// example topologies on a fresh clone) can be given one: its public key is then read from that
// same directory. Half a pair is left alone; loading the topology names what is wrong with it.
void create_missing_key_pairs(const std::string& file, bool quiet) {
  LoadOptions o;
  o.require_keys = false;
  const Topology topology = load_topology(file, o);
  for (NodeId id : topology.ids()) {
    const std::string dir = topology.key_dir_of(id);
    if (dir.empty() || topology.node(id).public_key) continue;
    std::error_code ec;
    if (fs::exists(fs::path(dir) / kSecretKeyFile, ec) || fs::exists(fs::path(dir) / kPublicKeyFile, ec)) continue;
    write_new_identity(dir);
    if (!quiet) std::cerr << "created a key pair for " << topology.describe(id) << " in " << dir << "\n";
  }
  for (const auto& r : topology.relays) {
    if (r.key_dir.empty() || r.public_key) continue;
    const std::string dir = topology.resolve(r.key_dir);
    std::error_code ec;
    if (fs::exists(fs::path(dir) / kSecretKeyFile, ec) || fs::exists(fs::path(dir) / kPublicKeyFile, ec)) continue;
    write_new_identity(dir);
    if (!quiet) std::cerr << "created a key pair for relay '" << r.name << "' in " << dir << "\n";
  }
}

}  // namespace

int cmd_launch(const std::vector<std::string>& argv) {
  std::vector<std::string> rest;
  const std::string file = split_positional(argv, {"--threads", "--timeout", "--metrics-dir", "--report"}, rest);
  const Args a(rest, {"threads", "timeout", "metrics-dir", "report"}, {"quiet", "discover"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  if (file.empty()) throw UsageError("give the topology file to launch");
  const int threads = static_cast<int>(a.integer("threads", 1, 1, 1024));
  const double timeout = a.real("timeout", 0, 0, 1e9);
  // Checked here, once, rather than by every node process (they inherit it); below info, the
  // launcher's own progress lines go too.
  const bool quiet = a.flag("quiet") || log_level_from_environment() < LogLevel::Info;
  std::string metrics_dir;
  if (a.has("metrics-dir")) {
    metrics_dir = fs::absolute(a.required("metrics-dir")).string();
    std::error_code ec;
    fs::create_directories(metrics_dir, ec);
    if (ec || !fs::is_directory(metrics_dir)) throw InputError("--metrics-dir: cannot create the folder '" + metrics_dir + "'");
  }
  const std::string report = output_path_option(a, "report");
  create_missing_key_pairs(file, quiet);
  const Topology topology = load_topology(file);
  const std::string exe = self_executable();
  const std::string topology_path = fs::absolute(file).string();

  std::vector<Child> children;
  for (NodeId id : topology.ids()) {
    Child c;
    c.id = id;
    const auto& n = topology.node(id);
    c.label = n.name.empty() ? std::to_string(id) : n.name;
    c.state_dir = topology.state_dir_of(id);
    std::error_code ec;
    fs::create_directories(c.state_dir, ec);
    if (ec) throw InputError("cannot create '" + c.state_dir + "': " + ec.message());
    fs::remove(c.state_dir + "/result.json", ec);  // a stale result must not pass for this run's
    fs::remove(c.state_dir + "/status.json", ec);  // nor a stale status for this run's progress
    children.push_back(c);
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const std::vector<pid_t> relays = spawn_relays(exe, topology, topology_path, metrics_dir, quiet);
  for (auto& c : children) {
    c.pid = spawn(exe, topology_path, c, threads, metrics_dir, a.flag("discover"));
    c.running = true;
  }
  if (!quiet)
    std::cerr << "launched " << children.size() << " nodes of " << file << " (" << to_string(topology.federation.mode)
              << ", " << topology.federation.method << "); logs in each state directory's node.log\n";

  const auto t0 = std::chrono::steady_clock::now();
  bool stopping = false;
  size_t running = children.size();
  auto last_status = t0;
  LiveTable live(::isatty(2) != 0);
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0 && std::count(relays.begin(), relays.end(), pid)) {
      if (!quiet) std::cerr << "a relay exited early (" << (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status))
                            << "): see its log\n";
      continue;
    }
    if (pid > 0) {
      for (auto& c : children)
        if (c.pid == pid && c.running) {
          c.running = false;
          c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          --running;
          if (!quiet) {
            std::cerr << "node " << c.label << " exited (" << c.exit_code << "), " << running << " still running\n";
            live.interrupted();
          }
        }
      continue;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!stopping && (g_interrupted || (timeout > 0 && elapsed > timeout))) {
      stopping = true;
      if (!quiet) std::cerr << (g_interrupted ? "interrupted" : "timeout") << ": stopping the nodes\n";
      for (auto& c : children)
        if (c.running) ::kill(c.pid, SIGTERM);
    }
    if (!quiet && std::chrono::steady_clock::now() - last_status > std::chrono::seconds(1)) {
      last_status = std::chrono::steady_clock::now();
      live.show(read_node_views(topology), static_cast<int>(elapsed));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  stop_relays(relays);
  // A result.json is this launch's (the old ones were removed at the start). It is the node's
  // own word, and a node whose process was stopped and then run again by hand finished all the
  // same, though the process launched here exited otherwise.
  bool all_finished = true;
  int exit_status = kExitSuccess;
  std::vector<std::string> notes;
  char line[512];
  // Status wide enough for "no result (exit 137)".
  std::snprintf(line, sizeof line, "%-10s %-20s %-16s %9s %12s %12s\n", "node", "status", "contributors", "accuracy",
                "bytes sent", "bytes recv");
  std::cout << line;
  for (const auto& c : children) {
    const std::string path = c.state_dir + "/result.json";
    std::ifstream in(path);
    ResultRow r;
    if (!in) {
      r = ResultRow{"no result (exit " + std::to_string(c.exit_code) + ")", "-", "-", "-", "-", ""};
    } else {
      r = read_result_row(in, path);
      if (!r.error.empty()) notes.push_back("node " + c.label + ": " + r.error);
    }
    if (r.status != "finished") {
      if (all_finished) exit_status = c.exit_code > 0 ? c.exit_code : kExitError;
      all_finished = false;
    } else if (c.exit_code != 0)
      notes.push_back("node " + c.label + ": the process launched here exited " + std::to_string(c.exit_code) +
                      ", but its result says finished (written by a later run of that node, or before the process "
                      "was stopped)");
    std::snprintf(line, sizeof line, "%-10s %-20s %-16s %9s %12s %12s\n", c.label.c_str(), r.status.c_str(),
                  r.contributors.c_str(), r.accuracy.c_str(), r.bytes_sent.c_str(), r.bytes_received.c_str());
    std::cout << line;
  }
  for (const auto& n : notes) std::cout << n << "\n";
  if (!report.empty()) {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    replace_file_at_once(report, launch_report_json(topology, topology_path, wall));
    std::cout << "report: " << report << " (fednode report " << report << " --html DIR draws it)\n";
  }
  std::cout << (all_finished ? "every node finished\n" : "NOT every node finished: see the node.log files\n");
  return exit_status;
}

}  // namespace fednode::cli
