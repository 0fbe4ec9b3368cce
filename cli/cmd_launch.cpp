// fednode launch: every node of a topology file on this machine, each its own `fednode run`
// process, with progress, one result table and an exit status that says whether all finished.
#include "cli/args.h"
#include "cli/commands.h"
#include "topology/topology.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode launch FILE [--threads N] [--timeout SECONDS] [--quiet]\n"
    "  Starts every node of the topology FILE as a separate 'fednode run' process on this\n"
    "  machine, shows their progress, and prints one table (node, status, contributors,\n"
    "  accuracy, bytes) from their result.json files. Each node's output goes to node.log in\n"
    "  its state directory.\n"
    "  --threads N        compute threads per node (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS; default 1)\n"
    "  --timeout SECONDS  stop every node still running after this long (default: none)\n"
    "  --quiet            no progress lines; only the table\n"
    "Exit status: 0 when every node's result.json says finished (also one run again by hand\n"
    "after its process here was stopped), 1 otherwise, 2 for a usage error.\n";

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

pid_t spawn(const std::string& exe, const std::string& topology_file, const Child& c, int threads) {
  const std::string log = c.state_dir + "/node.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError("cannot open '" + log + "': " + std::strerror(errno));
  const std::string id = std::to_string(c.id), t = std::to_string(threads);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    throw InputError(std::string("cannot start a node process: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setenv("OMP_NUM_THREADS", t.c_str(), 1);
    ::setenv("OPENBLAS_NUM_THREADS", t.c_str(), 1);
    std::signal(SIGINT, SIG_IGN);  // the launcher decides when its nodes stop
    const char* args[] = {exe.c_str(), "run", "--topology", topology_file.c_str(), "--id", id.c_str(), nullptr};
    ::execv(exe.c_str(), const_cast<char* const*>(args));
    std::fprintf(stderr, "cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

// A few fields of a node's result.json, read without a JSON library: the file is ours.
std::string json_field(const std::string& text, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  const auto at = text.find(k);
  if (at == std::string::npos) return "";
  size_t i = at + k.size();
  while (i < text.size() && text[i] == ' ') ++i;
  if (i < text.size() && text[i] == '"') {
    const auto end = text.find('"', i + 1);
    return text.substr(i + 1, end - i - 1);
  }
  if (i < text.size() && text[i] == '[') {
    const auto end = text.find(']', i);
    return text.substr(i, end - i + 1);
  }
  size_t j = i;
  while (j < text.size() && text[j] != ',' && text[j] != '}' && text[j] != '\n') ++j;
  return text.substr(i, j - i);
}

// "[0, 1, 2, 3, 5]" -> "0-3,5": a star of 32 nodes still fits the table.
std::string compact_ids(const std::string& list) {
  std::vector<long> ids;
  std::string digits;
  for (char c : list + ",") {
    if (c >= '0' && c <= '9') digits.push_back(c);
    else if (!digits.empty()) {
      ids.push_back(std::stol(digits));
      digits.clear();
    }
  }
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ids[i]) + (j > i ? "-" + std::to_string(ids[j]) : "");
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

}  // namespace

int cmd_launch(const std::vector<std::string>& argv) {
  std::vector<std::string> rest;
  std::string file;
  for (const auto& s : argv)
    if (file.empty() && !s.empty() && s[0] != '-') file = s;
    else rest.push_back(s);
  const Args a(rest, {"threads", "timeout"}, {"quiet"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  if (file.empty()) throw UsageError("give the topology file to launch");
  const int threads = static_cast<int>(a.integer("threads", 1, 1, 1024));
  const double timeout = a.real("timeout", 0, 0, 1e9);
  const bool quiet = a.flag("quiet");
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
    children.push_back(c);
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  for (auto& c : children) {
    c.pid = spawn(exe, topology_path, c, threads);
    c.running = true;
  }
  if (!quiet)
    std::cerr << "launched " << children.size() << " nodes of " << file << " (" << to_string(topology.federation.mode)
              << ", " << topology.federation.method << "); logs in each state directory's node.log\n";

  const auto t0 = std::chrono::steady_clock::now();
  bool stopping = false;
  size_t running = children.size();
  auto last_status = t0;
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (auto& c : children)
        if (c.pid == pid && c.running) {
          c.running = false;
          c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          --running;
          if (!quiet) std::cerr << "node " << c.label << " exited (" << c.exit_code << "), " << running << " still running\n";
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
    if (!quiet && std::chrono::steady_clock::now() - last_status > std::chrono::seconds(15)) {
      last_status = std::chrono::steady_clock::now();
      std::cerr << static_cast<int>(elapsed) << " s: " << running << " node(s) running:";
      for (const auto& c : children)
        if (c.running) std::cerr << ' ' << c.label;
      std::cerr << "\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // A result.json is this launch's (the old ones were removed at the start). It is the node's
  // own word, and a node whose process was stopped and then run again by hand finished all the
  // same, though the process launched here exited otherwise.
  bool all_finished = true;
  std::vector<std::string> notes;
  char line[512];
  // Status wide enough for "no result (exit 137)".
  std::snprintf(line, sizeof line, "%-10s %-20s %-16s %9s %12s %12s\n", "node", "status", "contributors", "accuracy",
                "bytes sent", "bytes recv");
  std::cout << line;
  for (const auto& c : children) {
    std::ifstream in(c.state_dir + "/result.json");
    std::stringstream text;
    text << in.rdbuf();
    const std::string r = text.str();
    std::string st = in ? json_field(r, "status") : "no result (exit " + std::to_string(c.exit_code) + ")";
    if (st != "finished") all_finished = false;
    else if (c.exit_code != 0)
      notes.push_back("node " + c.label + ": the process launched here exited " + std::to_string(c.exit_code) +
                      ", but its result says finished (written by a later run of that node, or before the process "
                      "was stopped)");
    std::string contributors = in ? compact_ids(json_field(r, "contributors")) : "-";
    std::string acc = in ? json_field(r, "accuracy") : "-";
    if (in && !acc.empty() && acc != "null") {
      char a[32];
      std::snprintf(a, sizeof a, "%.4f", std::atof(acc.c_str()));
      acc = a;
    }
    std::snprintf(line, sizeof line, "%-10s %-20s %-16s %9s %12s %12s\n", c.label.c_str(), st.c_str(),
                  contributors.c_str(), acc.c_str(), in ? json_field(r, "bytes_sent").c_str() : "-",
                  in ? json_field(r, "bytes_received").c_str() : "-");
    std::cout << line;
  }
  for (const auto& n : notes) std::cout << n << "\n";
  std::cout << (all_finished ? "every node finished\n" : "NOT every node finished: see the node.log files\n");
  return all_finished ? 0 : 1;
}

}  // namespace fednode::cli
