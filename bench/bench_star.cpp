// A star federation on this machine through the real command line (issue 3, acceptance 4): one
// hub and N-1 leaves, each its own `fednode run` process on loopback, against the same federation
// in one process (`fednode simulate --topology star`), in the same run.
//
// The nodes are started the way `fednode launch FILE --threads 1` starts them (fork + exec of
// `fednode run --topology FILE --id I`, OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = 1), but by this
// program, so that wait4() hands back each node's own peak resident set (ru_maxrss) and CPU time:
// no /usr/bin/time. RSS counts the pages of shared libraries (LibTorch, OpenBLAS) in every process
// that maps them, so the processes' proportional and private sets (Pss, Private_* of
// /proc/PID/smaps_rollup) are sampled every 100 ms as well: their peaks say what one more node
// really costs, and the peak of the summed Pss what the whole federation held at once. The wall
// time runs from the first fork to the last exit.
// Then the simulator runs the same data, partition, method and seed, also with one thread.
//
// Usage: bench_star [--nodes N] [--fednode PATH] [--train-limit N] [--test-limit N] [--method M]
//                   [--base-port P] [--silence SECONDS] [--timeout SECONDS] [--keep] [--json FILE]
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
using fednode::bench::median;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "bench_star: %s\n", why.c_str());
  std::exit(1);
}

long parse_long(const char* flag, const char* value, long lo, long hi) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (!end || *end || v < lo || v > hi) die(std::string(flag) + " needs an integer in [" + std::to_string(lo) + ", " +
                                            std::to_string(hi) + "], got '" + value + "'");
  return v;
}

struct Proc {
  std::string label;
  pid_t pid = -1;
  Clock::time_point start;
  double wall_s = 0;
  double cpu_s = 0;
  long maxrss_kb = 0;
  long peak_pss_kb = 0;      // sampled
  long peak_private_kb = 0;  // sampled
  double exited_at = 0;      // wall clock (seconds since the epoch), to compare with file times
  int exit_code = -1;
  bool running = false;
};

// Starts `args` with its output in `log` and one compute thread.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die("cannot open '" + log + "': " + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) die(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

// Pss and Private_Clean + Private_Dirty of a running process, in KiB; false once it is gone.
bool sample_memory(pid_t pid, long& pss, long& priv) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  if (!in) return false;
  pss = priv = 0;
  bool any = false;
  std::string line;
  while (std::getline(in, line)) {  // "Pss:   1234 kB"; the first line names the range
    std::istringstream fields(line);
    std::string key;
    long value = 0;
    if (!(fields >> key >> value)) continue;
    if (key == "Pss:") pss = value, any = true;
    else if (key == "Private_Clean:" || key == "Private_Dirty:") priv += value;
  }
  return any;
}

// Waits for every process in `procs`, recording each one's wall time, CPU time and peak RSS.
// After `timeout_s` the ones still running get SIGTERM (and SIGKILL 10 s later).
// Returns the peak over the samples of the processes' summed Pss.
long wait_all(std::vector<Proc>& procs, double timeout_s) {
  size_t running = 0;
  for (const auto& p : procs) running += p.running;
  const auto t0 = Clock::now();
  auto last_sample = t0 - std::chrono::seconds(1);
  long peak_total_pss = 0;
  bool terminated = false, killed = false;
  while (running > 0) {
    int status = 0;
    struct rusage ru {};
    const pid_t pid = ::wait4(-1, &status, WNOHANG, &ru);
    if (pid < 0 && errno != EINTR) die(std::string("wait4: ") + std::strerror(errno));
    if (pid > 0) {
      for (auto& p : procs)
        if (p.pid == pid && p.running) {
          p.running = false;
          p.wall_s = std::chrono::duration<double>(Clock::now() - p.start).count();
          p.exited_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
          p.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                    1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
          p.maxrss_kb = ru.ru_maxrss;
          p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          --running;
        }
      continue;
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (timeout_s > 0 && elapsed > timeout_s && !terminated) {
      std::fprintf(stderr, "bench_star: timeout after %.0f s, stopping %zu process(es)\n", elapsed, running);
      for (const auto& p : procs)
        if (p.running) ::kill(p.pid, SIGTERM);
      terminated = true;
    }
    if (terminated && !killed && elapsed > timeout_s + 10) {
      for (const auto& p : procs)
        if (p.running) ::kill(p.pid, SIGKILL);
      killed = true;
    }
    if (Clock::now() - last_sample >= std::chrono::milliseconds(100)) {
      last_sample = Clock::now();
      long total = 0;
      for (auto& p : procs) {
        long pss = 0, priv = 0;
        if (!p.running || !sample_memory(p.pid, pss, priv)) continue;
        p.peak_pss_kb = std::max(p.peak_pss_kb, pss);
        p.peak_private_kb = std::max(p.peak_private_kb, priv);
        total += pss;
      }
      peak_total_pss = std::max(peak_total_pss, total);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return peak_total_pss;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first value of "key" in a JSON text we wrote ourselves (result.json, the simulator's report).
std::string json_value(const std::string& text, const std::string& key, size_t from = 0) {
  const auto at = text.find("\"" + key + "\":", from);
  if (at == std::string::npos) return "";
  size_t i = at + key.size() + 3;
  while (i < text.size() && text[i] == ' ') ++i;
  if (i < text.size() && text[i] == '"') return text.substr(i + 1, text.find('"', i + 1) - i - 1);
  size_t j = i;
  while (j < text.size() && text[j] != ',' && text[j] != '}' && text[j] != '\n') ++j;
  return text.substr(i, j - i);
}


// Modification time of a file in seconds since the epoch, or -1.
double mtime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
}

double mib(long kb) { return static_cast<double>(kb) / 1024.0; }

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int bench_main(int argc, char** argv) {
  int nodes = 32;
  long train_limit = 20000, test_limit = 2000, base_port = 0, timeout_s = 900;
  std::string fednode = FEDNODE_CLI_PATH, json_path, method = "fedpft", silence = "30";
  bool keep = false;
  if (fednode::bench::wants_help(argc, argv)) {
    std::printf("usage: bench_star [--nodes 32] [--fednode PATH (the built CLI)] [--train-limit 20000] [--test-limit 2000]\n"
                "                  [--method fedpft|fedcgs|fedtc (default fedpft)]\n"
                "                  [--base-port P (default: from the process id)] [--silence 30 (the topology's\n"
                "                  silence_seconds)] [--timeout 900] [--keep] [--json FILE]\n");
    return 0;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--keep") {
      keep = true;
      continue;
    }
    if (i + 1 >= argc) die(flag + " needs a value");
    const char* value = argv[++i];
    if (flag == "--nodes") nodes = static_cast<int>(parse_long("--nodes", value, 2, 1024));
    else if (flag == "--fednode") fednode = value;
    else if (flag == "--method") method = value;
    else if (flag == "--train-limit") train_limit = parse_long("--train-limit", value, 1, 1L << 30);
    else if (flag == "--test-limit") test_limit = parse_long("--test-limit", value, 1, 1L << 30);
    else if (flag == "--base-port") base_port = parse_long("--base-port", value, 1, 65535);
    else if (flag == "--silence") silence = value;
    else if (flag == "--timeout") timeout_s = parse_long("--timeout", value, 1, 1L << 20);
    else if (flag == "--json") json_path = value, fednode::bench::require_writable("bench_star", "--json", json_path);
    else {
      std::fprintf(stderr, "usage: bench_star [--nodes N] [--fednode PATH] [--train-limit N] [--test-limit N] [--method M] "
                           "[--base-port P] [--silence SECONDS] [--timeout SECONDS] [--keep] [--json FILE]\n");
      return 2;
    }
  }
  if (::access(fednode.c_str(), X_OK) != 0) die("no fednode executable at '" + fednode + "' (give --fednode)");
  // A port range per process id, so two runs on one machine do not collide; below the ephemeral
  // range (32768-60999), where a DEALER dialling a port nobody listens on yet can connect to
  // itself (TCP simultaneous open) and see that connection break.
  if (base_port == 0) base_port = 20000 + (static_cast<long>(::getpid()) % 100) * 100;
  if (base_port + nodes > 65535) die("--base-port: the nodes' ports would run past 65535");

  char tmpl[] = "/tmp/fednode-star-XXXXXX";
  if (!::mkdtemp(tmpl)) die(std::string("mkdtemp: ") + std::strerror(errno));
  const std::string dir = tmpl;
  const std::string topology = dir + "/star.toml";
  const std::string n = std::to_string(nodes), train = std::to_string(train_limit), test = std::to_string(test_limit);
  const std::string load_before = load_average();

  // 1. The topology file and a key pair per node.
  {
    std::vector<Proc> p(1);
    p[0].label = "topology";
    p[0].start = Clock::now();
    p[0].pid = spawn({fednode, "topology", "star", "--nodes", n, "--method", method, "--out", topology, "--base-port",
                      std::to_string(base_port), "--run", "bench-star-" + std::to_string(::getpid()), "--data",
                      "dataset=fashion-mnist", "--data", "partition=dirichlet", "--data", "dirichlet-alpha=0.5",
                      "--data", "train-limit=" + train, "--data", "test-limit=" + test, "--silence", silence},
                     dir + "/topology.log");
    p[0].running = true;
    wait_all(p, 60);
    if (p[0].exit_code != 0) die("fednode topology failed: " + read_file(dir + "/topology.log"));
  }

  // 2. The networked federation: every node its own process.
  std::vector<Proc> procs(static_cast<size_t>(nodes));
  const auto t0 = Clock::now();
  const double t0_wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (int i = 0; i < nodes; ++i) {
    Proc& p = procs[static_cast<size_t>(i)];
    p.label = i == 0 ? "hub" : "leaf";
    p.start = Clock::now();
    p.pid = spawn({fednode, "run", "--topology", topology, "--id", std::to_string(i)},
                  dir + "/node" + std::to_string(i) + ".log");
    p.running = true;
  }
  const long network_peak_pss = wait_all(procs, static_cast<double>(timeout_s));
  const double network_wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string load_mid = load_average();

  // 3. The same federation in one process.
  std::vector<Proc> sim(1);
  sim[0].label = "simulate";
  sim[0].start = Clock::now();
  sim[0].pid = spawn({fednode, "simulate", "--dataset", "fashion-mnist", "--partition", "dirichlet",
                      "--dirichlet-alpha", "0.5", "--train-limit", train, "--test-limit", test, "--method", method,
                      "--topology", "star", "--nodes", n, "--seed", "0", "--no-baselines", "--quiet", "--report",
                      dir + "/simulate.json"},
                     dir + "/simulate.log");
  sim[0].running = true;
  wait_all(sim, static_cast<double>(timeout_s));
  const std::string load_after = load_average();

  // Results: every node's status and accuracy, and the simulator's accuracy for the hub.
  int finished = 0;
  std::vector<double> leaf_rss, leaf_wall, leaf_cpu, leaf_pss, leaf_private, after_result, result_at;
  double cpu_total = 0;
  // Frames on the wire, from every node's result.json (its last process): first sends, resends,
  // and the duplicates receivers counted (a resend whose original had arrived).
  long first_sends = 0, resends = 0, duplicates = 0;
  std::string hub_accuracy = "-";
  for (int i = 0; i < nodes; ++i) {
    const Proc& p = procs[static_cast<size_t>(i)];
    const std::string result = read_file(dir + "/state/n" + std::to_string(i) + "/result.json");
    if (p.exit_code == 0 && json_value(result, "status") == "finished") ++finished;
    else std::fprintf(stderr, "bench_star: node %d exit %d, status '%s' (log: %s/node%d.log)\n", i, p.exit_code,
                      json_value(result, "status").c_str(), dir.c_str(), i);
    const double written = mtime(dir + "/state/n" + std::to_string(i) + "/result.json");
    if (written > 0) {
      after_result.push_back(p.exited_at - written);
      if (i > 0) result_at.push_back(written - t0_wall);
    }
    const auto count = [&](const char* key) {
      const std::string v = json_value(result, key);
      return v.empty() ? 0L : std::stol(v);
    };
    first_sends += count("messages_sent");
    resends += count("resends");
    duplicates += count("duplicates");
    if (i == 0) hub_accuracy = json_value(result, "accuracy");
    else {
      leaf_rss.push_back(mib(p.maxrss_kb));
      leaf_wall.push_back(p.wall_s);
      leaf_cpu.push_back(p.cpu_s);
      leaf_pss.push_back(mib(p.peak_pss_kb));
      leaf_private.push_back(mib(p.peak_private_kb));
    }
    cpu_total += p.cpu_s;
  }
  const std::string report = read_file(dir + "/simulate.json");
  const std::string sim_accuracy = json_value(report, "accuracy", report.find("\"nodes\""));
  if (sim[0].exit_code != 0) std::fprintf(stderr, "bench_star: simulate exit %d (log: %s/simulate.log)\n",
                                          sim[0].exit_code, dir.c_str());

  const Proc& hub = procs[0];
  std::printf("Star of %d nodes (1 hub, %d leaves) on loopback, %s (defaults), Fashion-MNIST pixels, "
              "Dirichlet 0.5, train %ld / test %ld, 1 thread per process\n",
              nodes, nodes - 1, method.c_str(), train_limit, test_limit);
  std::printf("load average before / after the nodes / after simulate: %s / %s / %s\n", load_before.c_str(),
              load_mid.c_str(), load_after.c_str());
  auto lo = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  auto hi = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  std::printf("%-30s %8s %8s %10s %10s %10s\n", "", "wall s", "CPU s", "RSS MiB", "Pss MiB", "priv MiB");
  std::printf("%-30s %8.2f %8.2f %10s %10.1f %10s\n", "networked, whole federation", network_wall, cpu_total, "-",
              mib(network_peak_pss), "-");
  std::printf("%-30s %8.2f %8.2f %10.1f %10.1f %10.1f\n", "  hub (node 0)", hub.wall_s, hub.cpu_s, mib(hub.maxrss_kb),
              mib(hub.peak_pss_kb), mib(hub.peak_private_kb));
  std::printf("%-30s %8.2f %8.2f %10.1f %10.1f %10.1f\n", "  leaves: min", lo(leaf_wall), lo(leaf_cpu), lo(leaf_rss),
              lo(leaf_pss), lo(leaf_private));
  std::printf("%-30s %8.2f %8.2f %10.1f %10.1f %10.1f\n", "  leaves: median", median(leaf_wall), median(leaf_cpu),
              median(leaf_rss), median(leaf_pss), median(leaf_private));
  std::printf("%-30s %8.2f %8.2f %10.1f %10.1f %10.1f\n", "  leaves: max", hi(leaf_wall), hi(leaf_cpu), hi(leaf_rss),
              hi(leaf_pss), hi(leaf_private));
  std::printf("%-30s %8.2f %8.2f %10.1f %10.1f %10.1f\n", "simulate (one process)", sim[0].wall_s, sim[0].cpu_s,
              mib(sim[0].maxrss_kb), mib(sim[0].peak_pss_kb), mib(sim[0].peak_private_kb));
  std::printf("(RSS: exact peak from wait4; Pss and private: peaks of samples every 100 ms; the federation's Pss is "
              "the peak of the sum over its processes)\n");
  // The reference measured in the same run: the same federation as one `fednode simulate`.
  if (sim[0].wall_s > 0 && sim[0].cpu_s > 0 && sim[0].peak_pss_kb > 0)
    std::printf("networked / simulate: wall %.2fx, CPU %.2fx, peak Pss %.2fx\n", network_wall / sim[0].wall_s,
                cpu_total / sim[0].cpu_s, static_cast<double>(network_peak_pss) / static_cast<double>(sim[0].peak_pss_kb));
  if (!after_result.empty()) {
    std::printf("result.json written, seconds after the first start: leaves %.2f to %.2f, hub %.2f; from writing "
                "it to process exit: median %.2f s, max %.2f s\n",
                result_at.empty() ? 0.0 : lo(result_at), result_at.empty() ? 0.0 : hi(result_at),
                mtime(dir + "/state/n0/result.json") - t0_wall, median(after_result), hi(after_result));
  }
  std::printf("nodes finished: %d of %d; hub accuracy %s, simulate's %s\n", finished, nodes, hub_accuracy.c_str(),
              sim_accuracy.empty() ? "-" : sim_accuracy.c_str());
  const long frames = first_sends + resends;
  std::printf("frames sent: %ld first sends, %ld resends; duplicates received: %ld (%.2f%% of frames)\n", first_sends,
              resends, duplicates, frames > 0 ? 100.0 * static_cast<double>(duplicates) / static_cast<double>(frames) : 0.0);

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    if (!out) die("cannot write '" + json_path + "'");
    out.precision(6);
    out << "{\n  \"nodes\": " << nodes << ", \"method\": \"" << method << "\", \"train_limit\": " << train_limit << ", \"test_limit\": " << test_limit
        << ",\n  \"load_average\": [\"" << load_before << "\", \"" << load_mid << "\", \"" << load_after << "\"],\n"
        << "  \"finished\": " << finished << ", \"network_wall_s\": " << network_wall << ", \"network_cpu_s\": "
        << cpu_total << ", \"network_peak_pss_kib\": " << network_peak_pss
        << ",\n  \"last_leaf_result_s\": " << (result_at.empty() ? 0.0 : hi(result_at))
        << ", \"hub_result_s\": " << mtime(dir + "/state/n0/result.json") - t0_wall
        << ", \"exit_after_result_s\": {\"median\": " << (after_result.empty() ? 0.0 : median(after_result))
        << ", \"max\": " << (after_result.empty() ? 0.0 : hi(after_result)) << "}"
        << ",\n  \"first_sends\": " << first_sends << ", \"resends\": " << resends << ", \"duplicates\": " << duplicates
        << ",\n  \"hub_accuracy\": " << (hub_accuracy.empty() ? "null" : hub_accuracy)
        << ", \"simulate_accuracy\": " << (sim_accuracy.empty() ? "null" : sim_accuracy)
        << ",\n  \"simulate\": {\"wall_s\": " << sim[0].wall_s << ", \"cpu_s\": " << sim[0].cpu_s
        << ", \"maxrss_kib\": " << sim[0].maxrss_kb << ", \"peak_pss_kib\": " << sim[0].peak_pss_kb
        << ", \"peak_private_kib\": " << sim[0].peak_private_kb << ", \"exit\": " << sim[0].exit_code << "},\n  \"processes\": [\n";
    for (size_t i = 0; i < procs.size(); ++i)
      out << "    {\"id\": " << i << ", \"role\": \"" << procs[i].label << "\", \"wall_s\": " << procs[i].wall_s
          << ", \"cpu_s\": " << procs[i].cpu_s << ", \"maxrss_kib\": " << procs[i].maxrss_kb
          << ", \"peak_pss_kib\": " << procs[i].peak_pss_kb << ", \"peak_private_kib\": " << procs[i].peak_private_kb
          << ", \"exit\": " << procs[i].exit_code << "}" << (i + 1 < procs.size() ? ",\n" : "\n");
    out << "  ]\n}\n";
  }

  const bool ok = finished == nodes && sim[0].exit_code == 0;
  if (keep || !ok) {
    std::printf("files kept in %s\n", dir.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  return fednode::bench::guarded("bench_star", [&] { return bench_main(argc, argv); });
}
