// Shared by the multi-process tests: a federation on loopback written to a temporary folder
// (topology file, keys, state), the fednode executable run as a user runs it, and the few JSON
// fields the tests compare (node result.json, simulate's report, parsed by ../common/read_json.h).
#pragma once

#include "../common/read_json.h"
#include "../common/run_cli.h"
#include "crypto/key_files.h"
#include "topology/builders.h"
#include "topology/plan.h"
#include "topology/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fednode::testing_network {

namespace fs = std::filesystem;

using fednode::test::CliRun;
using fednode::test::field;
using fednode::test::int_list;
using fednode::test::integer_or;
using fednode::test::number_or;
using fednode::test::read_json;
using fednode::test::string_or;

// One compute thread per process, as `fednode launch` runs its nodes, so that the simulator and
// the nodes train their heads with the same floating-point sums.
inline CliRun run_cli(const std::string& args) {
  return fednode::test::run_cli(args, "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1");
}

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct NodeOutcome {
  std::string status;
  double accuracy = -1;
  std::vector<long> contributors;
  long frames_rejected = 0, restarts = 0, duplicates = 0;
  long knowledge_bytes = -1;  // result.json's knowledge_bytes_sent, a report's bytes_sent
  // Personalised FedCGS: the personal head's accuracy in the node's own class proportions.
  double personal = -1;
};

// A node's result.json; a missing or unparsable file is a test failure naming it (and gives an
// outcome with nothing set).
inline NodeOutcome read_result(const fs::path& state_dir) {
  const nlohmann::json j = read_json(state_dir / "result.json");
  NodeOutcome o;
  o.status = string_or(field(j, "status"));
  o.accuracy = number_or(field(j, "accuracy"), -1);  // null without a head
  o.contributors = int_list(field(j, "contributors"));
  o.frames_rejected = integer_or(field(j, "frames_rejected"), 0);
  o.restarts = integer_or(field(j, "restarts"), 0);
  o.duplicates = integer_or(field(j, "duplicates"), 0);
  o.knowledge_bytes = integer_or(field(j, "knowledge_bytes_sent"), -1);
  o.personal = number_or(field(j, "personal_accuracy_in_own_proportions"), -1);
  return o;
}

// Per node of a `fednode simulate` report: accuracy, contributors and bytes sent, in node order.
inline std::vector<NodeOutcome> read_report(const fs::path& report) {
  const nlohmann::json j = read_json(report);
  std::vector<NodeOutcome> nodes;
  const nlohmann::json& listed = field(j, "nodes");
  if (!listed.is_array()) return nodes;
  for (const auto& n : listed) {
    NodeOutcome o;
    o.accuracy = number_or(field(n, "accuracy"), -1);
    o.contributors = int_list(field(n, "contributors"));
    o.knowledge_bytes = integer_or(field(n, "bytes_sent"), -1);
    o.personal = number_or(field(field(n, "personalized"), "personal"), -1);
    nodes.push_back(o);
  }
  return nodes;
}

struct Federation {
  fs::path dir;
  fs::path file;
  Topology topology;
  OptionMap options, data;
  std::string method;
  uint64_t seed = 0;

  fs::path state_dir(NodeId id) const { return topology.state_dir_of(id); }

  // The same federation's `fednode simulate` command line (linear, ring or star).
  std::string simulate_args(const std::string& report) const {
    std::string s = "simulate --quiet --no-baselines --method " + method + " --topology " +
                    to_string(topology.federation.mode) + " --nodes " + std::to_string(topology.nodes.size()) +
                    " --seed " + std::to_string(seed) + " --report " + report;
    for (const auto* m : {&data, &options})
      for (const auto& [k, v] : *m)
        if (v == "true") s += " --" + k;  // a flag
        else if (v != "false") s += " --" + k + " '" + v + "'";  // a value may hold spaces (a command)
    return s;
  }
};

// Writes a federation of `nodes` nodes into `dir`: keys from `fednode keygen`'s library call, a
// topology file with a run name unique to this process, state folders beside it.
inline Federation make_federation(const fs::path& dir, TopologyMode mode, int nodes, const std::string& method,
                                  int base_port, const OptionMap& options, const OptionMap& data, uint64_t seed = 3) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  Federation f;
  f.dir = dir;
  f.file = dir / "federation.toml";
  f.method = method;
  f.options = options;
  f.data = data;
  f.seed = seed;
  TopologyBuildOptions b;
  b.mode = mode;
  b.nodes = nodes;
  b.base_port = base_port;
  b.method = method;
  b.seed = seed;
  b.deadline_seconds = 120;
  b.options = options;
  b.data = data;
  b.key_root = "keys";
  b.state_root = "state";
  b.base_dir = dir.string();
  b.run = "test-" + dir.filename().string() + "-" + std::to_string(::getpid());
  b.public_key = [](const TopologyNode&, const std::string& key_dir) {
    return write_new_identity(key_dir).to_hex();
  };
  const Topology t = build_topology(b);
  save_topology(t, f.file.string());
  f.topology = load_topology(f.file.string());
  return f;
}

// Writes the federation's file again after a test changed its topology.
inline void save_again(Federation& f) {
  fs::remove(f.file);
  save_topology(f.topology, f.file.string());
  f.topology = load_topology(f.file.string());
}

// Writes the federation's file again with another deadline, for tests of what deadlines do.
inline void set_deadline(Federation& f, double seconds) {
  f.topology.federation.deadline_seconds = seconds;
  save_again(f);
}

// Waits up to a minute for `line` to appear in the log at `path` at or after byte `from`;
// whether it did.
inline bool wait_for_log(const fs::path& path, const std::string& line, size_t from = 0) {
  for (int i = 0; i < 1200 && read_text(path).find(line, from) == std::string::npos; ++i) ::usleep(50 * 1000);
  return read_text(path).find(line, from) != std::string::npos;
}

// The pid of the `fednode run --topology FILE --id ID` process, or -1.
inline pid_t find_run_process(const fs::path& file, NodeId id) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> args;
    for (size_t at = 0; at < cmdline.size();) {
      const size_t end = cmdline.find('\0', at);
      args.push_back(cmdline.substr(at, end == std::string::npos ? std::string::npos : end - at));
      if (end == std::string::npos) break;
      at = end + 1;
    }
    const std::vector<std::string> want = {"run", "--topology", file.string(), "--id", std::to_string(id)};
    // Options after these (launch's --metrics) may follow.
    if (args.size() >= want.size() + 1 && std::equal(want.begin(), want.end(), args.begin() + 1))
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

// A fresh folder for one test under the system's temporary directory.
inline fs::path test_dir(const std::string& suite) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info->name();
  for (char& c : name)
    if (c == '/') c = '_';  // parameterised tests are named "Test/param"
  return fs::temp_directory_path() / ("fednode_" + suite + "_" + std::to_string(::getpid()) + "_" + name);
}

// Removes a test's folder when the test ends without a failure, and keeps it for a look otherwise
// (a NAT test's relay, keys and five state folders are 10-20 MB).
struct RemovedUnlessFailed {
  fs::path dir;
  ~RemovedUnlessFailed() {
    std::error_code ignored;
    if (!::testing::Test::HasFailure()) fs::remove_all(dir, ignored);
  }
};

}  // namespace fednode::testing_network

namespace fednode::testing_network {

// `fednode ARGS...` in the background, with one compute thread, its output appended to `log`.
inline pid_t spawn_cli(const std::vector<std::string>& args, const std::string& log) {
  std::vector<const char*> argv = {FEDNODE_CLI};
  for (const auto& arg : args) argv.push_back(arg.c_str());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    FILE* out = std::fopen(log.c_str(), "a");
    if (out) {
      ::dup2(fileno(out), 1);
      ::dup2(fileno(out), 2);
    }
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::execv(FEDNODE_CLI, const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  return pid;
}

// `fednode run` for one node in the background, its output appended to node.log in its state
// directory (as `fednode launch` does).
inline pid_t spawn_node(const Federation& f, NodeId id) {
  const fs::path state = f.state_dir(id);
  fs::create_directories(state);
  return spawn_cli({"run", "--topology", f.file.string(), "--id", std::to_string(id)}, (state / "node.log").string());
}

// The exit code of `pid`, waiting at most `seconds` (then -1, and the process is killed).
inline int wait_exit(pid_t pid, double seconds) {
  for (int i = 0; i < static_cast<int>(seconds * 20); ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    ::usleep(50000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace fednode::testing_network

namespace fednode::testing_network {

// Runs `fednode simulate` on the same federation and checks every node's result.json against
// it: finished, the plan's contributors, and the simulator's contributors and accuracy exactly
// (the same method code, data and seeds; float16 transfer is exact because the methods round to
// float16 before anything leaves a node: docs/node.md, "Equal to simulate").
inline void expect_every_node_equals_simulate(const Federation& f) {
  const CliRun sim = run_cli(f.simulate_args((f.dir / "report.json").string()));
  ASSERT_EQ(sim.code, 0) << sim.output;
  const std::vector<NodeOutcome> expected = read_report(f.dir / "report.json");
  ASSERT_EQ(expected.size(), f.topology.nodes.size());
  for (NodeId id : f.topology.ids()) {
    const NodeOutcome got = read_result(f.state_dir(id));
    EXPECT_EQ(got.status, "finished") << "node " << id;
    // Secure aggregation brings a chain's every node the total (PlanOptions::secure_aggregation).
    PlanOptions planned;
    for (const char* key : {"secure-aggregation", "secure_aggregation"}) {
      const auto it = f.topology.federation.options.find(key);
      if (it != f.topology.federation.options.end() && it->second != "off") planned.secure_aggregation = true;
    }
    const auto& plan_expected = plan_for(f.topology, id, planned).expected_contributors;
    EXPECT_EQ(got.contributors, std::vector<long>(plan_expected.begin(), plan_expected.end())) << "node " << id;
    EXPECT_EQ(got.contributors, expected[id].contributors) << "node " << id;
    EXPECT_DOUBLE_EQ(got.accuracy, expected[id].accuracy) << "node " << id;
    // Over the whole run, restarts included.
    EXPECT_EQ(got.knowledge_bytes, expected[id].knowledge_bytes) << "node " << id;
    EXPECT_DOUBLE_EQ(got.personal, expected[id].personal) << "node " << id;
  }
}

}  // namespace fednode::testing_network
