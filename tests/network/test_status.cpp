// `fednode status` and launch's live table on a real launch: a chain 0 -> 1 -> 2 whose first node
// is slow (a head of very many steps), whose middle node is killed while it waits: the status
// says it stopped and that node 2 waits for it, and the launcher's own lines show the same.
#include "federation.h"

#include <gtest/gtest.h>

#include <csignal>
#include <future>
#include <optional>
#include <set>
#include <sstream>
#include <regex>

namespace fednode::testing_network {
namespace {

nlohmann::json node_of(const nlohmann::json& views, const std::string& name) {
  if (views.is_array())
    for (const auto& v : views)
      if (v.value("name", "") == name) return v;
  ADD_FAILURE() << "no node " << name << " in " << views.dump();
  return nlohmann::json::object();
}

TEST(Status, ShowsAStoppedNodeAndWhomTheOthersWaitFor) {
  const auto dir = test_dir("status");
  Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedpft", 23985,
                                 {{"components", "1"}, {"head-lr", "0.001"}, {"head-min-steps", "50"}},
                                 {{"dataset", "fashion-mnist"}, {"train-limit", "900"}, {"test-limit", "100"}});
  // Node 0 trains its head for minutes before it sends anything; the others wait for it.
  f.topology.nodes[0].options["head-min-steps"] = "100000000";
  save_again(f);
  const fs::path metrics = dir / "metrics";
  auto launch = std::async(std::launch::async, [&] {
    return run_cli("launch " + f.file.string() + " --timeout 25 --metrics-dir " + metrics.string());
  });

  for (NodeId id : {NodeId{1}, NodeId{2}})
    ASSERT_TRUE(wait_for_log(f.state_dir(id) / "node.log", "waits for")) << read_text(f.state_dir(id) / "node.log");
  // status.json comes within a second of the node's first step.
  for (int i = 0; i < 100 && !fs::exists(f.state_dir(1) / "status.json"); ++i) ::usleep(50 * 1000);
  pid_t middle = -1;
  for (int i = 0; i < 100 && middle < 0; ++i, ::usleep(50 * 1000)) middle = find_run_process(f.file, 1);
  ASSERT_GT(middle, 0);
  ASSERT_EQ(::kill(middle, SIGKILL), 0);
  ::usleep(1500 * 1000);  // node 2 rewrites its status; the launcher reaps node 1

  const CliRun status = run_cli("status " + f.file.string() + " --format json");
  ASSERT_EQ(status.code, 0) << status.output;
  const nlohmann::json views = test::parse_json(status.output, "fednode status --format json");
  const auto n0 = node_of(views, "n0"), n1 = node_of(views, "n1"), n2 = node_of(views, "n2");
  EXPECT_EQ(n0.value("state", ""), "running") << n0.dump();
  EXPECT_EQ(n0.value("stage", ""), "phase 1") << n0.dump();
  EXPECT_EQ(n1.value("state", ""), "stopped") << n1.dump();
  EXPECT_EQ(n1["awaiting"], nlohmann::json::array({0})) << "what it was waiting for when it stopped: " << n1.dump();
  EXPECT_EQ(n2.value("state", ""), "running") << n2.dump();
  EXPECT_EQ(n2["awaiting"], nlohmann::json::array({1})) << n2.dump();
  ASSERT_TRUE(n2["deadline_in_seconds"].is_number()) << n2.dump();
  EXPECT_GT(n2["deadline_in_seconds"].get<double>(), 60.0) << "make_federation's deadline is 120 s";

  // The metrics file says the same to Prometheus.
  const std::string n2_metrics = read_text(metrics / "fednode-n2.prom");
  EXPECT_NE(n2_metrics.find("fednode_stage{node=\"n2\",id=\"2\",stage=\"phase 1\"} 1\n"), std::string::npos) << n2_metrics;
  EXPECT_NE(n2_metrics.find("fednode_awaited_peers{node=\"n2\",id=\"2\"} 1\n"), std::string::npos) << n2_metrics;
  EXPECT_NE(n2_metrics.find("fednode_status{node=\"n2\",id=\"2\",status=\"running\"} 1\n"), std::string::npos)
      << n2_metrics;

  const CliRun table = run_cli("status " + f.file.string());
  EXPECT_EQ(table.code, 0) << table.output;
  EXPECT_NE(table.output.find("stopped"), std::string::npos) << table.output;

  // The launcher is not on a terminal here: it prints a table whenever a node's state changes,
  // so its output holds one with node 1 stopped and node 2 waiting for it.
  const CliRun out = launch.get();
  EXPECT_NE(out.code, 0) << out.output;  // stopped at its timeout
  bool seen = false;
  std::istringstream lines(out.output);
  std::string line, n1_line;
  while (std::getline(lines, line)) {
    if (line.rfind("n1 ", 0) == 0 && line.find("stopped") != std::string::npos) seen = true;
    if (seen && std::regex_search(line, std::regex("^n2 +running +phase 1 +1 "))) n1_line = line;
  }
  EXPECT_TRUE(seen) << out.output;
  EXPECT_FALSE(n1_line.empty()) << "node 2 waiting for 1 after node 1 stopped:\n" << out.output;
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

// The value of one sample of a metrics file: the line that starts with `series` and a space.
std::optional<double> sample_of(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return std::nullopt;
}

// A run to its end: every node's last metrics agree with its result.json, and every family has
// its HELP and TYPE lines (what node_exporter's textfile collector requires).
TEST(Status, MetricsFilesAgreeWithTheResults) {
  const auto dir = test_dir("metrics");
  Federation f = make_federation(dir, TopologyMode::Linear, 2, "fedcgs", 23988, {},
                                 {{"dataset", "fashion-mnist"}, {"train-limit", "600"}, {"test-limit", "100"}});
  const fs::path metrics = dir / "metrics";
  const fs::path report = dir / "launch-report.json";
  const CliRun out = run_cli("launch " + f.file.string() + " --quiet --metrics-dir " + metrics.string() + " --report " +
                             report.string());
  ASSERT_EQ(out.code, 0) << out.output;
  // The launch's report draws as simulate's does, with every node's accuracy and bytes from its
  // result.json (docs/report.md).
  const fs::path html = dir / "html";
  const CliRun drawn = run_cli("report " + report.string() + " --html " + html.string());
  ASSERT_EQ(drawn.code, 0) << drawn.output;
  const std::string page = read_text(html / "index.html");
  for (NodeId id : {0u, 1u}) {
    const nlohmann::json r = read_json(f.state_dir(id) / "result.json");
    const std::string node = "node-" + std::to_string(id);
    for (const auto& [cell, key] : {std::pair{"-accuracy", "accuracy"}, {"-bytes-sent", "bytes_sent"}}) {
      const std::string attr = "id=\"" + node + cell + "\" data-value=\"";
      const size_t at = page.find(attr);
      ASSERT_NE(at, std::string::npos) << attr;
      const double shown = std::stod(page.substr(at + attr.size(), 40));
      EXPECT_DOUBLE_EQ(shown, r[key].get<double>()) << node << cell;
    }
  }
  for (const char* name : {"n0", "n1"}) {
    const std::string text = read_text(metrics / (std::string("fednode-") + name + ".prom"));
    const nlohmann::json result = read_json(f.state_dir(name == std::string("n0") ? 0 : 1) / "result.json");
    const std::string labels = std::string("{node=\"") + name + "\",id=\"" + (name[1] == '0' ? "0" : "1") + "\"";
    EXPECT_EQ(sample_of(text, "fednode_status" + labels + ",status=\"finished\"}"), 1.0) << text;
    for (const char* field : {"bytes_sent", "bytes_received", "messages_sent", "messages_received", "resends", "duplicates"})
      EXPECT_EQ(sample_of(text, "fednode_" + std::string(field) + "_total" + labels + "}"), result[field].get<double>())
          << field << "\n" << text;
    std::istringstream lines(text);
    std::string line;
    std::set<std::string> typed;
    while (std::getline(lines, line)) {
      if (line.rfind("# TYPE ", 0) == 0) typed.insert(line.substr(7, line.find(' ', 7) - 7));
      else if (line.rfind("#", 0) != 0) EXPECT_TRUE(typed.count(line.substr(0, line.find('{')))) << line;
    }
    // Bytes per link add up to the node's totals, each link to the other node (the only peer).
    const auto& links = result["links"];
    ASSERT_TRUE(links.is_array() && links.size() == 1u) << result.dump();
    EXPECT_EQ(links[0]["peer"].get<long>(), name[1] == '0' ? 1 : 0);
    EXPECT_EQ(links[0]["sent"].get<long>(), result["bytes_sent"].get<long>());
    EXPECT_EQ(links[0]["received"].get<long>(), result["bytes_received"].get<long>());
  }
  // What n0 sent n1 is n1's received from n0, and labels the edge 0 -> 1 of the drawing; the
  // status table lists both directions.
  const nlohmann::json r0 = read_json(f.state_dir(0) / "result.json"), r1 = read_json(f.state_dir(1) / "result.json");
  EXPECT_EQ(r0["links"][0]["sent"], r1["links"][0]["received"]);
  const long long sent = r0["links"][0]["sent"].get<long long>();
  const CliRun dot = run_cli("topology " + f.file.string() + " --dot");
  ASSERT_EQ(dot.code, 0) << dot.output;
  char mb[32];
  std::snprintf(mb, sizeof mb, "%.2f MB", sent / 1e6);
  EXPECT_NE(dot.output.find("\"0\" -> \"1\" [label=\"" + std::string(mb) + "\"]"), std::string::npos)
      << mb << "\n" << dot.output;
  const CliRun status = run_cli("status " + f.file.string());
  EXPECT_NE(status.output.find("n0 -> n1"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find(std::to_string(sent)), std::string::npos) << status.output;
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace fednode::testing_network
