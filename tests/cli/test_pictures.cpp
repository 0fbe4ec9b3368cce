// The pictures: `fednode report REPORT.json --html DIR` from a real simulate run, its numbers
// read back from the page and held against the JSON's, and `fednode topology FILE --dot|--svg`
// for every example topology (docs/cli.md, "Pictures").
#include "../common/read_json.h"
#include "../common/run_cli.h"
#include "../common/temp_dir.h"
#include "core/rng.h"
#include "features/npy.h"
#include "topology/topology.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace fednode {
namespace {

namespace fs = std::filesystem;

using fednode::test::CliRun;
using fednode::test::read_json;
using fednode::test::run_cli;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string four_decimals(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", v);
  return b;
}

// The element with id="ID": its data-value attribute and the text it shows.
struct Shown {
  bool found = false;
  std::string value, text;
};
Shown by_id(const std::string& html, const std::string& id) {
  const std::regex re("id=\"" + id + "\" data-value=\"([^\"]*)\">([^<]*)<");
  std::smatch m;
  if (!std::regex_search(html, m, re)) return {};
  return {true, m[1], m[2]};
}

// data-value of every mark with class=CLASS (and data-series=SERIES when given), by data-node.
std::map<long, std::string> marks(const std::string& html, const std::string& cls, const std::string& series = "") {
  std::map<long, std::string> out;
  const std::regex re("class=\"" + cls + "\"" + (series.empty() ? "" : " data-series=\"" + series + "\"") +
                      " data-node=\"([0-9]+)\" data-value=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), re); it != std::sregex_iterator(); ++it)
    out[std::stol((*it)[1])] = (*it)[2];
  return out;
}

class Pictures : public ::testing::Test {
 protected:
  void SetUp() override {
    write_split("train", 240, 21, {0, 1, 2, 3});
    // Class 3 has no test sample: its per-class accuracy is null in the report and grey on the page.
    write_split("test", 90, 22, {0, 1, 2});
  }

  void write_split(const std::string& name, int n, uint64_t seed, const std::vector<int>& classes) {
    Rng rng(seed);
    const int d = 6;
    MatrixF X(n, d);
    Labels y(n);
    for (int i = 0; i < n; ++i) {
      y[i] = classes[static_cast<size_t>(i) % classes.size()];
      for (int j = 0; j < d; ++j) X(i, j) = static_cast<float>((j % 4 == y[i] ? 4.0 : 0.0) + 1.5 * rng.normal());
    }
    write_npy_features((dir_ / (name + "_X.npy")).string(), X);
    write_npy_labels((dir_ / (name + "_y.npy")).string(), y);
  }

  std::string data_args() const { return test::npy_data_args(dir_.string()); }

  test::TempDir tmp_{"fednode_pictures"};
  fs::path dir_ = tmp_.path();
};

void expect_shown(const std::string& html, const std::string& id, const nlohmann::json& number, bool bytes = false) {
  const Shown s = by_id(html, id);
  ASSERT_TRUE(s.found) << "no element with id " << id;
  ASSERT_TRUE(number.is_number()) << id << ": " << number;
  EXPECT_EQ(std::stod(s.value), number.get<double>()) << id;
  EXPECT_EQ(s.text, bytes ? std::to_string(number.get<long long>()) : four_decimals(number.get<double>())) << id;
}

TEST_F(Pictures, ReportPageShowsTheReportsNumbers) {
  const fs::path report = dir_ / "report.json";
  const CliRun sim = run_cli("simulate " + data_args() +
                             " --method fedpft --topology linear --nodes 4 --partition dirichlet --dirichlet-alpha 0.5"
                             " --min-samples 5 --seed 3 --head-lr 0.1 --head-epochs 5 --quiet --report " + report.string(),
                             "OMP_NUM_THREADS=1");
  ASSERT_EQ(sim.code, 0) << sim.output;
  const nlohmann::json json = read_json(report);
  const fs::path out = dir_ / "html";
  const CliRun r = run_cli("report " + report.string() + " --html " + out.string() + " --layout fednode");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string html = read_text(out / "index.html");
  ASSERT_FALSE(html.empty());
  // Self-contained: no script, nothing fetched.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);

  expect_shown(html, "centralized-linear", json["centralized"]["linear"]);
  expect_shown(html, "centralized-lda", json["centralized"]["lda"]);
  expect_shown(html, "local-only-mean", json["local_only"]["mean"]);
  const auto bars = marks(html, "bar", "federated");
  const auto local_bars = marks(html, "bar", "local-only");
  const auto sent_bars = marks(html, "bar", "sent");
  const auto points = marks(html, "point", "federated");
  ASSERT_EQ(json["nodes"].size(), 4u);
  for (const auto& n : json["nodes"]) {
    const long id = n["id"].get<long>();
    const std::string p = "node-" + std::to_string(id);
    expect_shown(html, p + "-accuracy", n["accuracy"]);
    expect_shown(html, p + "-local-only", n["local_only_accuracy"]);
    expect_shown(html, p + "-bytes-sent", n["bytes_sent"], true);
    expect_shown(html, p + "-bytes-received", n["bytes_received"], true);
    ASSERT_TRUE(bars.count(id)) << id;
    EXPECT_EQ(std::stod(bars.at(id)), n["accuracy"].get<double>());
    EXPECT_EQ(std::stod(local_bars.at(id)), n["local_only_accuracy"].get<double>());
    EXPECT_EQ(std::stod(sent_bars.at(id)), n["bytes_sent"].get<double>());
    ASSERT_TRUE(points.count(id)) << "accuracy along the chain lacks node " << id;
    EXPECT_EQ(std::stod(points.at(id)), n["accuracy"].get<double>());
    // The heatmap: one cell per class, null shown as null (and grey), numbers as in the JSON.
    const auto& per_class = n["per_class_accuracy"];
    for (size_t c = 0; c < per_class.size(); ++c) {
      const std::regex cell("class=\"cell\" data-node=\"" + std::to_string(id) + "\" data-class=\"" +
                            std::to_string(c) + "\" data-value=\"([^\"]*)\"");
      std::smatch m;
      ASSERT_TRUE(std::regex_search(html, m, cell)) << "node " << id << " class " << c;
      if (per_class[c].is_null()) EXPECT_EQ(m[1], "null");
      else EXPECT_EQ(std::stod(m[1]), per_class[c].get<double>());
    }
    EXPECT_TRUE(per_class.at(3).is_null()) << "class 3 has no test sample";
  }
  // The topology drawing has every node, and the parameters table the run's.
  for (int id = 0; id < 4; ++id)
    EXPECT_NE(html.find("class=\"topology-node\" data-node=\"" + std::to_string(id) + "\""), std::string::npos) << id;
  EXPECT_NE(html.find("id=\"param-parameters.method\">fedpft<"), std::string::npos);
  EXPECT_NE(html.find("id=\"param-seed\">3<"), std::string::npos);

  // Rendered again into the same directory: replaced, not refused.
  EXPECT_EQ(run_cli("report " + report.string() + " --html " + out.string() + " --layout fednode").code, 0);
  // Graphviz's layout when it is installed; otherwise --layout graphviz names the missing program.
  const CliRun g = run_cli("report " + report.string() + " --html " + (dir_ / "g").string() + " --layout graphviz");
  if (g.code == 0) {
    const std::string page = read_text(dir_ / "g" / "index.html");
    EXPECT_NE(page.find("<svg"), std::string::npos);
    EXPECT_NE(page.find("laid out by Graphviz"), std::string::npos);
  } else {
    EXPECT_EQ(g.code, 1) << g.output;
    EXPECT_NE(g.output.find("'dot'"), std::string::npos) << g.output;
  }
}

TEST_F(Pictures, SeedSweepPageShowsTheMeans) {
  const fs::path report = dir_ / "sweep.json";
  ASSERT_EQ(run_cli("simulate " + data_args() + " --method fedcgs --topology star --nodes 3 --seeds 1-2 --quiet --report " +
                    report.string()).code, 0);
  const nlohmann::json json = read_json(report);
  const fs::path out = dir_ / "sweep";
  const CliRun r = run_cli("report " + report.string() + " --html " + out.string() + " --layout fednode");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string html = read_text(out / "index.html");
  expect_shown(html, "centralized-linear", json["summary"]["centralized"]["linear"]["mean"]);
  for (const auto& n : json["summary"]["nodes"]) {
    const std::string p = "node-" + std::to_string(n["id"].get<long>());
    expect_shown(html, p + "-accuracy", n["accuracy"]["mean"]);
    expect_shown(html, p + "-local-only", n["local_only_accuracy"]["mean"]);
  }
  EXPECT_NE(html.find("Only for linear and ring topologies"), std::string::npos);
}

TEST_F(Pictures, ReportErrorsNameTheFileAndWhatIsWrong) {
  const CliRun missing = run_cli("report " + (dir_ / "none.json").string() + " --html " + (dir_ / "o").string());
  EXPECT_EQ(missing.code, 1) << missing.output;
  EXPECT_NE(missing.output.find("none.json: cannot open"), std::string::npos) << missing.output;

  std::ofstream(dir_ / "other.json") << "{\"fednode_node_result\": 1}";
  const CliRun other = run_cli("report " + (dir_ / "other.json").string() + " --html " + (dir_ / "o").string());
  EXPECT_EQ(other.code, 1) << other.output;
  EXPECT_NE(other.output.find("other.json: not a fednode report"), std::string::npos) << other.output;

  std::ofstream(dir_ / "text.json") << "accuracy 0.9\n";
  const CliRun text = run_cli("report " + (dir_ / "text.json").string() + " --html " + (dir_ / "o").string());
  EXPECT_EQ(text.code, 1) << text.output;
  EXPECT_NE(text.output.find("text.json: not a JSON report"), std::string::npos) << text.output;

  std::ofstream(dir_ / "broken.json") << "{\"fednode_report\": 1, \"parameters\": {\"method\": \"fedcgs\"}}";
  const CliRun broken = run_cli("report " + (dir_ / "broken.json").string() + " --html " + (dir_ / "o").string());
  EXPECT_EQ(broken.code, 1) << broken.output;
  EXPECT_NE(broken.output.find("broken.json: parameters.topology is missing"), std::string::npos) << broken.output;

  // An --html that cannot be a directory: a file, or below one. No page is written.
  const fs::path report = dir_ / "report.json";
  ASSERT_EQ(run_cli("simulate " + data_args() + " --method fedcgs --nodes 2 --no-baselines --quiet --report " +
                    report.string()).code, 0);
  const CliRun onto_file = run_cli("report " + report.string() + " --html " + report.string());
  EXPECT_EQ(onto_file.code, 1) << onto_file.output;
  EXPECT_NE(onto_file.output.find("exists and is not a directory"), std::string::npos) << onto_file.output;
  const CliRun below_file = run_cli("report " + report.string() + " --html " + (report / "html").string());
  EXPECT_EQ(below_file.code, 1) << below_file.output;
  EXPECT_NE(below_file.output.find("cannot create the directory"), std::string::npos) << below_file.output;

  EXPECT_EQ(run_cli("report " + report.string()).code, 2);  // no --html
  EXPECT_EQ(run_cli("report --html " + (dir_ / "o").string()).code, 2);  // no report
  EXPECT_EQ(run_cli("report " + report.string() + " --html x --layout circles").code, 2);
  EXPECT_FALSE(fs::exists(dir_ / "o"));
}

// Every example topology draws: each node once as "<id>" [label=...], each edge as "<a>" -> "<b>".
TEST(TopologyPictures, EveryExampleTopologyDraws) {
  const fs::path examples = fs::path(FEDNODE_SOURCE_DIR) / "examples" / "topologies";
  test::TempDir tmp("fednode_topology_pictures");
  int drawn = 0;
  for (const auto& entry : fs::directory_iterator(examples)) {
    if (entry.path().extension() != ".toml") continue;
    const std::string file = entry.path().string();
    LoadOptions o;
    o.require_keys = false;
    const Topology t = load_topology(file, o);
    const CliRun r = run_cli("topology " + file + " --dot");
    ASSERT_EQ(r.code, 0) << file << ": " << r.output;
    EXPECT_EQ(r.output.rfind("digraph", 0), 0u) << r.output;
    for (const auto& n : t.nodes) {
      EXPECT_NE(r.output.find("\"" + std::to_string(n.id) + "\" [label=\"" + n.name + " (" + std::to_string(n.id) + ")\\n" + n.address),
                std::string::npos) << file << ": node " << n.id << "\n" << r.output;
    }
    for (const auto& e : t.edges)
      EXPECT_NE(r.output.find("\"" + std::to_string(e.from) + "\" -> \"" + std::to_string(e.to) + "\""), std::string::npos)
          << file << ": edge " << e.from << " -> " << e.to;
    // SVG through Graphviz where it is installed; a clear error naming the program otherwise.
    const std::string svg = (tmp.path() / (entry.path().stem().string() + ".svg")).string();
    const CliRun s = run_cli("topology " + file + " --svg --out " + svg);
    if (s.code == 0) {
      std::ifstream in(svg);
      std::stringstream text;
      text << in.rdbuf();
      EXPECT_NE(text.str().find("<svg"), std::string::npos) << file;
      for (const auto& n : t.nodes) EXPECT_NE(text.str().find(n.name + " (" + std::to_string(n.id) + ")"), std::string::npos) << n.name;
    } else {
      EXPECT_EQ(s.code, 1) << s.output;
      EXPECT_NE(s.output.find("'dot'"), std::string::npos) << s.output;
    }
    ++drawn;
  }
  EXPECT_GE(drawn, 4);
}

// With state directories, nodes are coloured by state: finished, stopped short, not started.
TEST(TopologyPictures, NodesAreColouredByTheirState) {
  test::TempDir tmp("fednode_topology_state");
  const std::string file = tmp / "chain.toml";
  ASSERT_EQ(run_cli("topology linear --nodes 3 --method fedcgs --out " + file + " --data dataset=fashion-mnist").code, 0);
  fs::create_directories(tmp.path() / "state" / "n0");
  fs::create_directories(tmp.path() / "state" / "n1");
  std::ofstream(tmp.path() / "state" / "n0" / "result.json")
      << "{\"status\": \"finished\", \"accuracy\": 0.75, \"bytes_sent\": 1234, \"bytes_received\": 0}";
  std::ofstream(tmp.path() / "state" / "n1" / "result.json") << "{\"status\": \"incomplete\", \"accuracy\": null}";
  const CliRun r = run_cli("topology " + file + " --dot");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("finished, accuracy 0.7500\\nsent 1234 B, received 0 B\", fillcolor=\"#b8e0b0\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("incomplete\", fillcolor=\"#f2b0a8\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("not started\", fillcolor=\"#e4e4e4\""), std::string::npos) << r.output;
}

TEST(TopologyPictures, DrawingErrorsAreClear) {
  const CliRun missing = run_cli("topology /nonexistent/t.toml --dot");
  EXPECT_EQ(missing.code, 1) << missing.output;
  EXPECT_NE(missing.output.find("/nonexistent/t.toml"), std::string::npos) << missing.output;
  const CliRun mode = run_cli("topology ring --dot");
  EXPECT_EQ(mode.code, 2) << mode.output;
  EXPECT_NE(mode.output.find("./ring"), std::string::npos) << mode.output;
  const std::string example = std::string(FEDNODE_SOURCE_DIR) + "/examples/topologies/ring4.toml";
  const CliRun neither = run_cli("topology " + example);
  EXPECT_EQ(neither.code, 2) << neither.output;
  EXPECT_NE(neither.output.find("--dot or --svg"), std::string::npos) << neither.output;
  EXPECT_EQ(run_cli("topology " + example + " --dot --svg").code, 2);
  // Without Graphviz on PATH, --svg names the program it needs.
  const CliRun no_dot = run_cli("topology " + example + " --svg", "PATH=/nonexistent");
  EXPECT_EQ(no_dot.code, 1) << no_dot.output;
  EXPECT_NE(no_dot.output.find("Graphviz's 'dot' program"), std::string::npos) << no_dot.output;
}

}  // namespace
}  // namespace fednode
