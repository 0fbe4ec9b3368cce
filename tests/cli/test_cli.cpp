// The fednode executable as a user runs it: real process, real files, exit codes and messages.
#include "../common/read_json.h"
#include "../common/run_cli.h"
#include "../common/temp_dir.h"
#include "features/npy.h"
#include "core/rng.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fednode {
namespace {

namespace fs = std::filesystem;

using fednode::test::CliRun;
using fednode::test::element;
using fednode::test::field;
using fednode::test::int_list;
using fednode::test::integer_or;
using fednode::test::number_or;
using fednode::test::parse_json;
using fednode::test::read_json;
using fednode::test::run_cli;
using fednode::test::string_or;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    write_split("train", 200, 11);
    write_split("test", 80, 12);
  }

  void write_split(const std::string& name, int n, uint64_t seed) {
    Rng rng(seed);
    const int classes = 3, d = 6;
    MatrixF X(n, d);
    Labels y(n);
    for (int i = 0; i < n; ++i) {
      y[i] = i % classes;
      for (int j = 0; j < d; ++j) X(i, j) = static_cast<float>((j % classes == y[i] ? 4.0 : 0.0) + rng.normal());
    }
    write_npy_features((dir_ / (name + "_X.npy")).string(), X);
    write_npy_labels((dir_ / (name + "_y.npy")).string(), y);
  }

  std::string data_args() const { return test::npy_data_args(dir_.string()); }

  test::TempDir tmp_{"fednode_cli"};
  fs::path dir_ = tmp_.path();
};

TEST_F(Cli, SimulateWritesAReport) {
  const fs::path report = dir_ / "report.json";
  const CliRun r = run_cli("simulate " + data_args() +
                        " --method fedcgs --topology star --nodes 4 --partition dirichlet"
                        " --dirichlet-alpha 0.5 --min-samples 5 --seed 3 --quiet --report " +
                        report.string());
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json json = read_json(report);
  EXPECT_TRUE(json.contains("centralized")) << json;
  EXPECT_TRUE(json.contains("nodes")) << json;
}

// The privacy ledger (docs/privacy.md): a leaf releases its DP statistics to the hub, the hub
// its own through the head it sends, each at the target epsilon; small classes are withheld.
// Personalised FedCGS in simulate: on the paper's partition every node reports its local-only,
// federation and personal heads' accuracies in its own class proportions; other methods refuse it.
TEST_F(Cli, SimulatePersonalizesFedCgsOnTheDominantPartition) {
  const fs::path report = dir_ / "personal.json";
  const CliRun r = run_cli("simulate " + data_args() + " --method fedcgs --topology star --nodes 3 --partition dominant" +
                           " --uniform-share 0.2 --classes-per-node 2 --seed 2 --no-baselines --quiet --personalize" +
                           " --personal-epochs 3 --report " + report.string());
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json j = read_json(report);
  EXPECT_EQ(j["parameters"]["partition"], "dominant");
  EXPECT_EQ(j["parameters"]["uniform_share"], 0.2);
  EXPECT_EQ(j["parameters"]["fedcgs"]["personalize"]["epochs"], 3);
  EXPECT_EQ(j["parameters"]["fedcgs"]["personalize"]["start"], "global");
  for (const auto& n : j["nodes"])
    for (const char* key : {"local_only", "fedcgs", "personal"}) {
      const double v = n["personalized"][key].get<double>();
      EXPECT_TRUE(v > 0 && v <= 1) << key << " " << v;
    }
  const CliRun pft = run_cli("simulate " + data_args() + " --method fedpft --nodes 2 --personalize --quiet");
  EXPECT_EQ(pft.code, 2);
  EXPECT_NE(pft.output.find("--personalize is a fedcgs option"), std::string::npos) << pft.output;
  const CliRun start = run_cli("simulate " + data_args() + " --method fedcgs --nodes 2 --personalize --personal-start zero --quiet");
  EXPECT_EQ(start.code, 2);
  EXPECT_NE(start.output.find("--personal-start must be global or scratch"), std::string::npos) << start.output;
  const CliRun stray = run_cli("simulate " + data_args() + " --method fedcgs --nodes 2 --personal-lambda 2 --quiet");
  EXPECT_EQ(stray.code, 2);
  EXPECT_NE(stray.output.find("applies to --personalize only"), std::string::npos) << stray.output;
  const CliRun share = run_cli("simulate " + data_args() + " --method fedcgs --nodes 2 --uniform-share 0.3 --quiet");
  EXPECT_EQ(share.code, 2);
  EXPECT_NE(share.output.find("--partition dominant"), std::string::npos) << share.output;
}

// The closed-form head is the default (--head-fit auto) end to end: the hub says how it chose the
// shrinkage, and the report says the head was solved, not trained; a trained head's option asks
// for the paper's head, and the report is then as it always was.
TEST_F(Cli, SimulateSolvesFedPftsHeadInClosedFormUnlessATrainedHeadIsAskedFor) {
  const fs::path report = dir_ / "report.json";
  const CliRun r = run_cli("simulate " + data_args() + " --method fedpft --topology star --nodes 3"
                           " --no-baselines --report " + report.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("fedpft head: closed form (LDA of the mixtures' moments), shrinkage "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("local rows ("), std::string::npos) << r.output;
  const nlohmann::json json = read_json(report);
  EXPECT_EQ(json["parameters"]["fedpft"]["head_fit"], "lda");
  EXPECT_EQ(json["parameters"]["fedpft"]["lda_shrinkage"], "auto");
  EXPECT_GT(json["nodes"][0]["accuracy"].get<double>(), 0.5);

  const CliRun trained = run_cli("simulate " + data_args() + " --method fedpft --head-lr 1e-3 --topology star"
                                 " --nodes 3 --no-baselines --report " + report.string());
  ASSERT_EQ(trained.code, 0) << trained.output;
  EXPECT_EQ(trained.output.find("closed form"), std::string::npos) << trained.output;
  EXPECT_FALSE(read_json(report)["parameters"]["fedpft"].contains("head_fit"));
}

TEST_F(Cli, SimulateWritesEachNodesPrivacyLedger) {
  const fs::path report = dir_ / "report.json";
  const CliRun r = run_cli("simulate " + data_args() +
                           " --method fedcgs --dp --dp-epsilon 2 --clip-norm 5 --min-class-count 8"
                           " --topology star --nodes 4 --partition dirichlet --dirichlet-alpha 0.3 --seed 3"
                           " --no-baselines --report " + report.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("privacy per node (docs/privacy.md): 0: eps 2 (delta 1e-05)"), std::string::npos) << r.output;
  const nlohmann::json json = read_json(report);
  EXPECT_EQ(json["parameters"]["fedcgs"]["dp_epsilon"], 2.0);
  int withheld = 0;
  for (const auto& node : json["nodes"]) {
    const auto& ledger = node["privacy"];
    EXPECT_NEAR(ledger["epsilon"].get<double>(), 2.0, 1e-9) << ledger;
    EXPECT_EQ(ledger["delta"], 1e-5);
    bool statistics = false;
    for (const auto& release : ledger["releases"]) {
      if (release["mechanism"] == "withheld") {
        ++withheld;
        const int c = release["classes"][0];
        EXPECT_LT(node["class_counts"][c].get<int>(), 8) << release;
        continue;
      }
      statistics = true;
      EXPECT_EQ(release["mechanism"], "gaussian (zCDP)");
      if (node["id"] == 0) {
        EXPECT_EQ(release["what"], "head, fitted on statistics A, N, B");
        EXPECT_EQ(release["to"], nlohmann::json::array({1, 2, 3}));
      } else {
        EXPECT_EQ(release["what"], "statistics A, N, B");
        EXPECT_EQ(release["to"], nlohmann::json::array({0}));
      }
    }
    EXPECT_TRUE(statistics) << node;
    for (size_t c = 0; c < node["class_counts"].size(); ++c) {
      const int n = node["class_counts"][c];
      if (n > 0 && n < 8) EXPECT_NE(ledger.dump().find("\"classes\":[" + std::to_string(c) + "]"), std::string::npos);
    }
  }
  EXPECT_GT(withheld, 0) << "alpha 0.3 leaves some node a class of fewer than 8 samples";
  // The page shows each node's total.
  const fs::path out = dir_ / "html";
  ASSERT_EQ(run_cli("report " + report.string() + " --html " + out.string()).code, 0);
  std::ifstream page(out / "index.html");
  const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("<th>privacy (epsilon, delta)</th>"), std::string::npos);
  const size_t cell = html.find("id=\"node-1-epsilon\"");
  ASSERT_NE(cell, std::string::npos) << html;
  EXPECT_EQ(html.substr(html.find('>', cell), 11), ">2, 1e-05</") << html.substr(cell, 80);
}

// Secure aggregation changes who can read what, never a result: on a star and a ring every
// node's head is the plain run's. A chain under it gains the ring's second pass, so every node
// ends with the head the plain chain gives only its tail.
TEST_F(Cli, SecureAggregationChangesNoPrediction) {
  const auto run = [&](const std::string& topology, const std::string& extra, const std::string& name) {
    const fs::path report = dir_ / (name + ".json");
    const CliRun r = run_cli("simulate " + data_args() + " --method fedcgs --topology " + topology +
                             " --partition dirichlet --dirichlet-alpha 0.5 --seed 4 --no-baselines --quiet " + extra +
                             " --report " + report.string());
    EXPECT_EQ(r.code, 0) << r.output;
    return read_json(report);
  };
  for (const std::string topology : {"star --nodes 6", "ring --nodes 4", "linear --nodes 5"}) {
    const bool chain = topology.rfind("linear", 0) == 0;
    const nlohmann::json plain = run(topology, "", "plain");
    const size_t n = plain["nodes"].size();
    for (const std::string mode : {"all", "counts"}) {
      const nlohmann::json secure = run(topology, "--secure-aggregation " + mode, mode);
      EXPECT_EQ(secure["parameters"]["secure_aggregation"], mode);
      ASSERT_EQ(secure["nodes"].size(), n);
      for (size_t i = 0; i < n; ++i) {
        const nlohmann::json& expected = plain["nodes"][chain ? n - 1 : i];
        EXPECT_EQ(secure["nodes"][i]["accuracy"], expected["accuracy"]) << topology << " " << mode << " node " << i;
        EXPECT_EQ(secure["nodes"][i]["per_class_accuracy"], expected["per_class_accuracy"]) << topology << " " << mode;
        EXPECT_EQ(secure["nodes"][i]["contributors"].size(), n) << topology << " " << mode;
      }
      // A leaf's masked parts travel as 16-byte ring elements instead of 8-byte doubles.
      if (mode == "all" && topology.rfind("star", 0) == 0)
        EXPECT_GT(secure["nodes"][1]["bytes_sent"].get<double>(), 1.9 * plain["nodes"][1]["bytes_sent"].get<double>());
    }
  }
  // A graph: the diamond's sink holds everyone in the plain run, and every node under secure
  // aggregation ends with its head; a random graph of 7 (seed 4: sinks 4, 5 and 6) has no such
  // node, and every node ends with the head on the total, the plain ring's.
  const nlohmann::json diamond = run("graph --nodes 4", "", "diamond");
  const nlohmann::json ring7 = run("ring --nodes 7", "", "ring7");
  for (const auto& [topology, plain, reference] :
       {std::tuple<std::string, const nlohmann::json*, size_t>{"graph --nodes 4", &diamond, 3},
        {"graph --nodes 7", &ring7, 0}}) {
    const nlohmann::json secure = run(topology, "--secure-aggregation all", "graph");
    const nlohmann::json& expected = (*plain)["nodes"][reference];
    ASSERT_EQ(expected["contributors"].size(), secure["nodes"].size()) << topology;
    for (const auto& node : secure["nodes"]) {
      EXPECT_EQ(node["per_class_accuracy"], expected["per_class_accuracy"]) << topology << " node " << node["id"];
      EXPECT_EQ(node["contributors"].size(), secure["nodes"].size()) << topology;
    }
  }
  const CliRun graph2 = run_cli("simulate " + data_args() + " --method fedcgs --topology graph --nodes 2 --secure-aggregation all --quiet");
  EXPECT_NE(graph2.code, 0);
  EXPECT_NE(graph2.output.find("at least three nodes"), std::string::npos) << graph2.output;
  const CliRun pair = run_cli("simulate " + data_args() + " --method fedcgs --topology ring --nodes 2 --secure-aggregation all --quiet");
  EXPECT_NE(pair.code, 0);
  EXPECT_NE(pair.output.find("at least three nodes"), std::string::npos) << pair.output;
  const CliRun alone = run_cli("simulate " + data_args() + " --method fedcgs --topology star --nodes 3 --dp --dp-distributed --quiet");
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.output.find("it needs --secure-aggregation"), std::string::npos) << alone.output;
  const CliRun pft = run_cli("simulate " + data_args() + " --method fedpft --topology star --nodes 3 --secure-aggregation all --quiet");
  EXPECT_EQ(pft.code, 2);
  EXPECT_NE(pft.output.find("needs knowledge that adds up"), std::string::npos) << pft.output;
}

// LibTorch is loaded only by what runs a backbone or trains a LibTorch head: a FedCGS federation
// on given features (statistics, an LDA head) and FedPFT with its default closed-form head run
// where the library cannot be found at all, and FedPFT training the paper's linear head says
// what it could not load and where it looked.
TEST_F(Cli, OnlyWhatNeedsLibTorchLoadsIt) {
  const std::string missing = (dir_ / "absent" / "libfednode_torch.so").string();
  const std::string env = "FEDNODE_TORCH_LIBRARY=" + missing;
  const std::string common = "simulate " + data_args() + " --topology star --nodes 3 --seed 3 --quiet --no-baselines";
  const CliRun fedcgs = run_cli(common + " --method fedcgs", env);
  EXPECT_EQ(fedcgs.code, 0) << fedcgs.output;
  const CliRun solved = run_cli(common + " --method fedpft --components 1", env);
  EXPECT_EQ(solved.code, 0) << solved.output;
  const CliRun fedpft = run_cli(common + " --method fedpft --components 1 --head-fit sgd", env);
  EXPECT_NE(fedpft.code, 0) << fedpft.output;
  EXPECT_NE(fedpft.output.find(missing + ": no such file"), std::string::npos) << fedpft.output;
  EXPECT_NE(fedpft.output.find("FEDNODE_TORCH_LIBRARY"), std::string::npos) << fedpft.output;
}

TEST_F(Cli, SimulateRunsOnBackboneFeatures) {
  const fs::path report = dir_ / "report.json";
  // A private cache, so the test neither reads nor fills the user's.
  const CliRun r = run_cli("simulate --dataset fashion-mnist --backbone default --input-size 32"
                           " --train-limit 300 --test-limit 100 --method fedcgs --topology star"
                           " --nodes 3 --seed 2 --no-baselines --quiet --report " + report.string(),
                           "XDG_CACHE_HOME=" + (dir_ / "cache").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json json = read_json(report);
  // The knowledge and the report carry the backbone's sha256 fingerprint, not "pixels".
  const std::string fingerprint = string_or(field(field(json, "parameters"), "backbone_fingerprint")).substr(0, 64);
  ASSERT_EQ(fingerprint.size(), 64u) << json;
  EXPECT_EQ(fingerprint.find_first_not_of("0123456789abcdef"), std::string::npos) << fingerprint;
  // .npy features named by a backbone must be that backbone's width.
  const CliRun narrow = run_cli("simulate " + data_args() + " --backbone default --quiet");
  EXPECT_EQ(narrow.code, 1) << narrow.output;
  EXPECT_NE(narrow.output.find("gives 1280"), std::string::npos) << narrow.output;
}

// The first element of the array `list` whose `key` is `value` (a node by id, a run by seed);
// null if there is none.
const nlohmann::json& element_with(const nlohmann::json& list, const std::string& key, long value) {
  static const nlohmann::json absent;
  if (list.is_array())
    for (const auto& e : list)
      if (integer_or(field(e, key), -1) == value) return e;
  return absent;
}

// A number of a report's first node (-1 if it has none).
double first_node_number(const nlohmann::json& report, const std::string& key) {
  return number_or(field(element(field(report, "nodes"), 0), key), -1);
}

TEST_F(Cli, SimulateExpandsFeaturesAndFedCgsStaysExact) {
  const fs::path report = dir_ / "report.json";
  const CliRun r = run_cli("simulate " + data_args() +
                           " --method fedcgs --topology linear --nodes 3 --partition dirichlet"
                           " --dirichlet-alpha 0.5 --min-samples 5 --seed 3 --feature-expansion 40"
                           " --feature-expansion-seed 9 --quiet --report " + report.string());
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(report);
  std::stringstream s;
  s << in.rdbuf();
  const std::string json = s.str();
  EXPECT_NE(json.find("+relu-projection-40-seed-9"), std::string::npos) << json;
  EXPECT_NE(json.find("expanded to 40 by a ReLU random projection (seed 9)"), std::string::npos);
  // The last node of the chain holds every node's statistics of the expanded features: its head
  // is the centralised LDA head on those features, to the last digit.
  const nlohmann::json parsed = read_json(report);
  const double lda = number_or(field(field(parsed, "centralized"), "lda"), -1);
  const nlohmann::json& last = element_with(field(parsed, "nodes"), "id", 2);
  ASSERT_TRUE(last.is_object()) << json;
  EXPECT_GT(lda, 0.5);
  EXPECT_EQ(number_or(field(last, "accuracy"), -1), lda);

  const CliRun seed_alone = run_cli("simulate " + data_args() + " --feature-expansion-seed 2 --quiet");
  EXPECT_EQ(seed_alone.code, 2);
  EXPECT_NE(seed_alone.output.find("--feature-expansion D"), std::string::npos) << seed_alone.output;
  const CliRun too_wide = run_cli("simulate " + data_args() + " --feature-expansion 20000 --quiet");
  EXPECT_EQ(too_wide.code, 2);
  EXPECT_NE(too_wide.output.find("feature-expansion"), std::string::npos) << too_wide.output;
}

TEST_F(Cli, SimulateOverSeveralSeeds) {
  const fs::path report = dir_ / "sweep.json";
  const CliRun r = run_cli("simulate " + data_args() +
                           " --method fedcgs --topology star --nodes 3 --partition dirichlet"
                           " --dirichlet-alpha 0.5 --min-samples 5 --seeds 4-5,9 --no-baselines --quiet --report " + report.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3 seeds"), std::string::npos) << r.output;
  const nlohmann::json json = read_json(report);
  EXPECT_EQ(int_list(field(json, "seeds")), (std::vector<long>{4, 5, 9})) << json;
  // Each run is the run its seed gives alone: seed 5's hub equals `--seed 5`'s.
  const fs::path alone = dir_ / "alone.json";
  ASSERT_EQ(run_cli("simulate " + data_args() +
                    " --method fedcgs --topology star --nodes 3 --partition dirichlet"
                    " --dirichlet-alpha 0.5 --min-samples 5 --seed 5 --no-baselines --quiet --report " + alone.string()).code, 0);
  const nlohmann::json a = read_json(alone);
  const nlohmann::json& run5 = element_with(field(json, "runs"), "seed", 5);
  ASSERT_TRUE(run5.is_object()) << json;
  EXPECT_EQ(first_node_number(run5, "samples"), first_node_number(a, "samples"));
  EXPECT_EQ(first_node_number(run5, "accuracy"), first_node_number(a, "accuracy"));

  for (const char* bad : {"--seeds 3-1", "--seeds 1,2,1", "--seeds x", "--seeds 1-", "--seeds 1 --seed 1",
                          "--seeds 0-5000"}) {
    const CliRun b = run_cli("simulate " + data_args() + " " + bad + " --quiet");
    EXPECT_EQ(b.code, 2) << bad << ": " << b.output;
    EXPECT_NE(b.output.find("seed"), std::string::npos) << bad << ": " << b.output;
  }
}

TEST_F(Cli, VersionNamesItselfTheProtocolAndTheLibrariesWithoutLoadingLibTorch) {
  const CliRun r = run_cli("--version", "FEDNODE_TORCH_LIBRARY=" + (dir_ / "absent.so").string());
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("^fednode [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << r.output;
  for (const char* part : {"protocol versions 1 ", ", 2 ", " and 3 ", "LibTorch 1.", "Eigen 3.", "msgpack-c ", "ZeroMQ 4.", "libsodium 1."})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in " << r.output;
  EXPECT_NE(run_cli("help").output.find("--version"), std::string::npos);
}

// What bash completes after `words` (the last one being completed), with the completion that
// cmake --install puts in share/bash-completion.
std::string completions(const std::string& words) {
  const std::string script = std::string(FEDNODE_SOURCE_DIR) + "/cli/share/fednode.bash-completion";
  const std::string cmd = "bash -c 'source \"$0\"; read -ra COMP_WORDS <<<\"$1\"; "
                          "[[ $1 == *\" \" ]] && COMP_WORDS+=(\"\"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); "
                          "_fednode; echo \"${COMPREPLY[*]}\"' " +
                          script + " '" + FEDNODE_CLI + " " + words + "' 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// `fednode train-generator` at a test's size, on the last 1 000 training images (which no test
// federation holds); returns its sidecar's text.
std::string train_tiny_generator(const fs::path& out, const std::string& options) {
  const CliRun trained = run_cli("train-generator --dataset fashion-mnist --from 59000 --to 60000 --epochs 1"
                                 " --width 8 --latent 8 --seed 2 --quiet --out " + out.string() + " " + options);
  EXPECT_EQ(trained.code, 0) << trained.output;
  std::ifstream sidecar(out.string() + ".generator");
  return std::string((std::istreambuf_iterator<char>(sidecar)), std::istreambuf_iterator<char>());
}

double hub_accuracy(const fs::path& report) {
  const nlohmann::json json = read_json(report);
  const nlohmann::json& node = element(json["nodes"], 0);
  return node.contains("accuracy") ? number_or(node["accuracy"], -1) : -1.0;
}

// scripts/fgl_generator_command.py around a generator file: the command contract in PyTorch.
std::string generator_command(const fs::path& generator) {
  return "/usr/bin/python3 " + std::string(FEDNODE_SOURCE_DIR) + "/scripts/fgl_generator_command.py " +
         generator.string();
}

// `common` with the generator file in process, then behind the command contract: both run and
// score the hub.
void expect_it_runs_in_process_and_as_a_command(const std::string& common, const fs::path& gen, const fs::path& dir) {
  const CliRun direct = run_cli(common + " --generator " + gen.string() + " --report " + (dir / "a.json").string());
  ASSERT_EQ(direct.code, 0) << direct.output;
  EXPECT_GT(hub_accuracy(dir / "a.json"), 0.0);
  const CliRun external = run_cli(common + " --generator-command '" + generator_command(gen) + "' --report " +
                                  (dir / "b.json").string());
  ASSERT_EQ(external.code, 0) << external.output;
  EXPECT_GT(hub_accuracy(dir / "b.json"), 0.0);
}

// FGL end to end: `train-generator` writes a TorchScript generator and its sidecar from images
// the federation does not hold; `simulate --method fgl` draws from it, in process and behind the
// external-command contract (scripts/fgl_generator_command.py, a real generator, not a stub).
TEST_F(Cli, FglTrainsAGeneratorAndSimulatesWithItDirectlyAndAsACommand) {
  const fs::path gen = dir_ / "gen.pt";
  const std::string text = train_tiny_generator(gen, "");
  EXPECT_NE(text.find("class = Ankle boot"), std::string::npos) << text;
  EXPECT_NE(text.find("trained_on = fashion-mnist training images 59000 to 59999"), std::string::npos) << text;
  const std::string common = "simulate --method fgl --dataset fashion-mnist --train-limit 600 --test-limit 200"
                             " --topology star --nodes 3 --cnn-epochs 1 --cnn-min-steps 50 --head-lr 0.01"
                             " --head-epochs 2 --head-min-steps 50 --quiet";
  expect_it_runs_in_process_and_as_a_command(common, gen, dir_);
  // One generator, named: neither or both is a usage error.
  EXPECT_EQ(run_cli(common).code, 2);
  EXPECT_EQ(run_cli(common + " --generator " + gen.string() + " --generator-command true").code, 2);
  // A generator that does not know the federation's class names says which.
  const CliRun unnamed = run_cli(common + " --generator " + gen.string() + " --class-names a,b,c,d,e,f,g,h,i,j");
  EXPECT_NE(unnamed.output.find("knows no class 'a'"), std::string::npos) << unnamed.output;
}

// FedMITR's pretrained start: `train-vit` writes a file `--vit-script` accepts, the same seeds
// give the same model (two files, one report), and what does not fit is refused by name.
TEST_F(Cli, FedMitrStartsFromAViTThatTrainVitPretrained) {
  const std::string train = "train-vit --dataset fashion-mnist --from 59000 --to 60000 --epochs 1 --vit-dim 16"
                            " --vit-depth 1 --vit-heads 2 --vit-mlp-dim 16 --seed 3 --threads 1 --quiet --out ";
  const CliRun a = run_cli(train + (dir_ / "a.pt").string());
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_NE(a.output.find("2986 parameters, 10 classes"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("trained on: fashion-mnist training images 59000 to 59999"), std::string::npos) << a.output;
  ASSERT_EQ(run_cli(train + (dir_ / "b.pt").string()).code, 0);
  const std::string common = "simulate --method fedmitr --dataset fashion-mnist --train-limit 600 --test-limit 200"
                             " --topology star --nodes 3 --client-epochs 1 --client-min-steps 0 --no-baselines --quiet";
  for (const char* file : {"a", "b"}) {
    const CliRun run = run_cli(common + " --vit-script " + (dir_ / (std::string(file) + ".pt")).string() + " --report " +
                               (dir_ / (std::string(file) + ".json")).string());
    ASSERT_EQ(run.code, 0) << run.output;
  }
  EXPECT_GT(hub_accuracy(dir_ / "a.json"), 0.0);
  EXPECT_EQ(hub_accuracy(dir_ / "a.json"), hub_accuracy(dir_ / "b.json"));
  // A file for another number of classes is the federation's error; a patch must divide the image.
  ASSERT_EQ(run_cli(train + (dir_ / "five.pt").string() + " --classes 5").code, 0);
  const CliRun five = run_cli(common + " --vit-script " + (dir_ / "five.pt").string());
  EXPECT_NE(five.code, 0);
  EXPECT_NE(five.output.find("has 5 classes, the federation 10"), std::string::npos) << five.output;
  const CliRun patch = run_cli(train + (dir_ / "c.pt").string() + " --vit-patch 5");
  EXPECT_NE(patch.code, 0);
  EXPECT_NE(patch.output.find("patch"), std::string::npos) << patch.output;
  EXPECT_EQ(run_cli("train-vit --out " + (dir_ / "d.pt").string()).code, 2);  // no images named
  EXPECT_FALSE(fs::exists(dir_ / "c.pt"));
}

// The text-conditioned kind: trained by fednode, it draws from the prompts in process and in
// PyTorch behind the command contract (its encode() is TorchScript too); and the linear receiver
// reads the synthetic images through the backbone the nodes' features came from.
TEST_F(Cli, FglDrawsFromPromptsAndReadsSyntheticImagesThroughTheBackbone) {
  const fs::path gen = dir_ / "text.pt";
  const std::string text = train_tiny_generator(gen, "--conditioning text");
  EXPECT_NE(text.find("kind = text"), std::string::npos) << text;
  EXPECT_NE(text.find("'{name}, real world images, high resolution'"), std::string::npos) << text;
  // Any class name encodes: names that the generator never saw still draw.
  const std::string common = "simulate --method fgl --dataset fashion-mnist --train-limit 600 --test-limit 200"
                             " --topology star --nodes 3 --head-lr 0.01 --head-epochs 2 --head-min-steps 50 --quiet"
                             " --no-baselines --receiver linear --class-names a,b,c,d,e,f,g,h,i,j";
  expect_it_runs_in_process_and_as_a_command(common, gen, dir_);
  const std::string private_cache = "XDG_CACHE_HOME=" + (dir_ / "cache").string();  // not the user's
  const CliRun backbone = run_cli(common + " --generator " + gen.string() + " --backbone default --input-size 32" +
                                  " --report " + (dir_ / "c.json").string(), private_cache);
  ASSERT_EQ(backbone.code, 0) << backbone.output;
  EXPECT_GT(hub_accuracy(dir_ / "c.json"), 0.0);
  EXPECT_EQ(read_json(dir_ / "c.json")["data"]["dim"], 1280) << backbone.output;
  // The CNN cannot read backbone features: the error says what would do.
  const CliRun cnn = run_cli("simulate --method fgl --dataset fashion-mnist --train-limit 600 --test-limit 200"
                             " --topology star --nodes 3 --quiet --generator " + gen.string() +
                             " --backbone default --input-size 32", private_cache);
  EXPECT_EQ(cnn.code, 1);
  EXPECT_NE(cnn.output.find("--receiver linear"), std::string::npos) << cnn.output;
}

TEST_F(Cli, BashCompletesCommandsOptionsAndTheirValuesFromTheHelpTexts) {
  EXPECT_EQ(completions("si"), "simulate\n");
  EXPECT_EQ(completions("--ver"), "--version\n");
  EXPECT_EQ(completions("simulate --synthetic-m"), "--synthetic-multiplier\n");
  EXPECT_EQ(completions("simulate --method "), "fedpft fedcgs fedtc fedmitr fgl\n");
  EXPECT_EQ(completions("simulate --component-draws m"), "multinomial\n");
  EXPECT_EQ(completions("launch --thr"), "--threads\n");
  const std::string file = (dir_ / "ring4.toml").string();
  std::ofstream(file) << "";
  EXPECT_EQ(completions("launch " + (dir_ / "ring").string()), file + "\n");
}

TEST_F(Cli, UnknownOptionIsAUsageError) {
  const CliRun r = run_cli("simulate " + data_args() + " --nodse 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--nodse"), std::string::npos) << r.output;
}

TEST_F(Cli, MissingFileIsNamed) {
  const CliRun r = run_cli("simulate --train-features /nonexistent/X.npy --train-labels a --test-features b"
                        " --test-labels c");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("/nonexistent/X.npy"), std::string::npos) << r.output;
}

TEST_F(Cli, UnwritableReportIsRefusedBeforeTheRun) {
  // Refused before the data is read: the training features do not even exist.
  const CliRun missing_dir = run_cli("simulate --train-features /nonexistent/X.npy --train-labels a"
                                     " --test-features b --test-labels c --report " +
                                     (dir_ / "no-such-dir" / "r.json").string());
  EXPECT_EQ(missing_dir.code, 1);
  EXPECT_NE(missing_dir.output.find("no-such-dir' does not exist"), std::string::npos) << missing_dir.output;
  EXPECT_EQ(missing_dir.output.find("X.npy"), std::string::npos) << missing_dir.output;
  const CliRun directory = run_cli("simulate " + data_args() + " --quiet --report " + dir_.string());
  EXPECT_EQ(directory.code, 1);
  EXPECT_NE(directory.output.find("is a directory"), std::string::npos) << directory.output;
}

TEST_F(Cli, ReportToAStreamIsWrittenInPlace) {
  // Reports replace a file by renaming a complete copy over it; a pipe (or /dev/stdout) must be
  // written to instead, not replaced by a regular file.
  const fs::path pipe = dir_ / "report.pipe";
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  // Held open read-write, the pipe never blocks the command's open, and the few KB of a small
  // report fit in its buffer until the command has exited.
  const int fd = ::open(pipe.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  const CliRun r = run_cli("simulate " + data_args() +
                           " --method fedcgs --nodes 2 --no-baselines --quiet --report " + pipe.string());
  std::string received;
  char buf[4096];
  ssize_t got;
  while ((got = ::read(fd, buf, sizeof buf)) > 0) received.append(buf, static_cast<size_t>(got));
  ::close(fd);
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json report = parse_json(received, pipe.string());
  EXPECT_EQ(integer_or(field(report, "fednode_report"), -1), 1) << received;
  EXPECT_TRUE(fs::is_fifo(pipe));
  EXPECT_FALSE(fs::exists(pipe.string() + ".tmp"));
}

TEST_F(Cli, CorruptNpyIsRejectedClearly) {
  std::ofstream((dir_ / "train_X.npy").string(), std::ios::trunc) << "\x93NUMPY garbage";
  const CliRun r = run_cli("simulate " + data_args() + " --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("train_X.npy"), std::string::npos) << r.output;
}

TEST_F(Cli, FeaturesWiderThanMessagesCarryAreRefusedBeforeTheRun) {
  MatrixF X = MatrixF::Zero(6, 16385);
  for (int i = 0; i < 6; ++i) X(i, i) = 1;
  write_npy_features((dir_ / "train_X.npy").string(), X);
  write_npy_labels((dir_ / "train_y.npy").string(), Labels{0, 1, 2, 0, 1, 2});
  const CliRun r = run_cli("simulate " + data_args() + " --method fedcgs --no-baselines --quiet --report /dev/null");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("16385 dimensions"), std::string::npos) << r.output;
}

TEST_F(Cli, OneStrayLargeLabelDoesNotMakeAMillionClasses) {
  Labels y(200);
  for (int i = 0; i < 200; ++i) y[i] = i % 3;
  y[4] = 999999;
  write_npy_labels((dir_ / "train_y.npy").string(), y);
  const CliRun r = run_cli("simulate " + data_args() + " --method fedcgs --no-baselines --quiet --report /dev/null");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("only 4 distinct labels occur"), std::string::npos) << r.output;
}

// Every head is scored on the test set; an empty one used to report accuracies of 0.
TEST_F(Cli, AnEmptyTestSetIsRefused) {
  write_npy_features((dir_ / "test_X.npy").string(), MatrixF(0, 6));
  write_npy_labels((dir_ / "test_y.npy").string(), Labels{});
  for (const std::string classes : {"", " --num-classes 3"}) {
    const CliRun r = run_cli("simulate " + data_args() + classes + " --method fedcgs --no-baselines --quiet --report /dev/null");
    EXPECT_EQ(r.code, 1) << classes;
    EXPECT_NE(r.output.find("test_y.npy"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("no samples"), std::string::npos) << r.output;
  }
}

TEST_F(Cli, BadValuesAreUsageErrors) {
  EXPECT_EQ(run_cli("simulate " + data_args() + " --nodes zero").code, 2);
  EXPECT_EQ(run_cli("simulate " + data_args() + " --method fedavg").code, 2);
  // Every bad choice on the command line is a usage error, named, whichever parser meets it.
  for (const auto& [args, names] : std::vector<std::pair<std::string, std::string>>{
           {"--topology mesh", "--topology: unknown topology mode 'mesh'"},
           {"--partition foo", "unknown partition scheme 'foo'"},
           {"--covariance round", "unknown covariance type 'round'"},
           {"--topology star --nodes 1", "--nodes: a star needs at least 2 nodes"},
           {"--method fedcgs --components 5", "--components is a fedpft option; the method is fedcgs"},
           {"--method fedpft --shrinkage 0.5", "--shrinkage is a fedcgs option"},
           {"--dp-epsilon 1", "--dp-epsilon sets DP-FedPFT's privacy; it needs --dp"},
           {"--input-size 64", "--input-size sets up the backbone's extraction; it needs --backbone"},
           {"--dp --dp-delta 1", "--dp-delta must be in [1e-300, 0.999999999999], got 1"},
           {"--dp --dp-delta every-class", "or per-class, the paper's 1/n for each class of n samples"},
           {"--method fedtc --adapter-hidden1 65536", "--adapter-hidden1 must be in [1, 8192]"},
           {"--head-lr fast", "--head-lr expects a number, got 'fast', or auto (chosen on a validation split"},
           {"--method fedtc --adapter-lr 0", "--adapter-lr must be in [1e-12, 10], got 0, or auto"},
           {"--validation-fraction 1", "--validation-fraction must be in [0.01, 0.9]"},
           {"--partition iid --dirichlet-alpha 0.3", "--dirichlet-alpha is a parameter of --partition dirichlet"},
           {"--partition dirichlet --classes-per-node 3", "--classes-per-node is a parameter of --partition shards"},
           {"--nodes 16385", "--nodes must be in [1, 16384]"},
           {"--sample-correlation all", "--sample-correlation must be none, local or shared, got 'all'"},
           {"--component-draws even", "--component-draws must be systematic or multinomial, got 'even'"},
           {"--head-fit tree", "--head-fit must be auto, sgd or lda, got 'tree'"},
           {"--head-fit sgd --lda-shrinkage 0.5", "--lda-shrinkage sets the closed-form head's covariance, and this head is trained on draws (a head option or --head-fit sgd asks for it)"},
           {"--head-epochs 5 --lda-shrinkage 0.5", "this head is trained on draws (a head option or --head-fit sgd asks for it)"},
           {"--covariance full --lda-shrinkage 0.5", "this head is trained on draws (these mixture options need it)"},
           {"--head-fit lda --lda-shrinkage 1.5", "--lda-shrinkage must be in [0, 1]"},
           {"--head-fit lda --sample-correlation shared", "--sample-correlation shared is drawn with; --head-fit lda reads the receiver's own correlation"},
           {"--head-fit lda --synthetic-multiplier 3", "--synthetic-multiplier shapes the synthetic draws"},
           {"--method fedcgs --head-fit lda", "--head-fit is a fedpft option"},
           {"--head-fit lda --dp", "DP-FedPFT's full Gaussians are drawn from as they arrive"},
           {"--head-fit lda --covariance full", "full covariances are drawn from as they arrive"},
           {"--method fedcgs --component-draws multinomial", "--component-draws is a fedpft option"},
           {"--dp --sample-correlation shared", "--sample-correlation shared applies to diagonal and spherical"},
           {"--correlation-rank 8", "--correlation-rank sets the shared covariance sketch; it needs --sample-correlation shared"},
           {"--sample-correlation shared --correlation-rank 0", "--correlation-rank"},
           {"--method fedtc --correlation-rank 8", "--correlation-rank is a fedpft option"},
           {"--method fedcgs --sample-correlation local", "--sample-correlation is a fedpft option"},
           {"--covariance full --sample-correlation local", "full covariances carry their own"},
           {"--dp --sample-correlation local", "DP-FedPFT's full Gaussians carry their own"},
           {"--method fedcgs --dp-epsilon 1", "--dp-epsilon applies to --dp only"},
           {"--method fedcgs --dp --dp-delta per-class", "DP-FedCGS releases all classes at once"},
           {"--method fedcgs --dp --dp-split 1,0,1", "--dp-split must be three positive numbers"},
           {"--method fedcgs --dp --clip-norm -1", "--clip-norm must be in"},
           {"--method fedtc --dp", "--dp is a fedpft option"},
           {"--min-class-count -2", "--min-class-count must be in [0"}}) {
    const CliRun r = run_cli("simulate " + data_args() + " " + args + " --quiet");
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(names), std::string::npos) << args << ": " << r.output;
  }
  EXPECT_EQ(run_cli("help frobnicate").code, 2);
  const CliRun help = run_cli("help simulate");
  EXPECT_EQ(help.code, 0);
  EXPECT_EQ(help.output.rfind("usage: fednode simulate", 0), 0u) << help.output;
  const CliRun classes = run_cli("simulate --dataset fashion-mnist --num-classes 5 --quiet");
  EXPECT_EQ(classes.code, 2);
  EXPECT_NE(classes.output.find("--num-classes is for .npy labels"), std::string::npos) << classes.output;
  EXPECT_EQ(run_cli("frobnicate").code, 2);
}

}  // namespace
}  // namespace fednode
