// Real nodes in separate processes on loopback (`fednode launch`), every topology mode and
// method, each node's result compared with `fednode simulate` on the same partition and seeds.
#include "federation.h"

#include <gtest/gtest.h>

namespace fednode::testing_network {
namespace {

// Small enough for CI on two cores, large enough that every node holds several classes.
OptionMap small_data() {
  return {{"dataset", "fashion-mnist"}, {"train-limit", "3000"}, {"test-limit", "1000"},
          {"partition", "dirichlet"}, {"dirichlet-alpha", "0.5"}, {"min-samples", "20"}};
}

OptionMap method_options(const std::string& method) {
  if (method == "fedpft") return {{"components", "2"}, {"covariance", "diag"}, {"head-epochs", "2"}, {"head-min-steps", "150"}};
  if (method == "fedtc") return {{"adapter-epochs", "2"}, {"adapter-min-steps", "60"}};
  return {};
}

// Launches every node of `f`, checks each against `fednode simulate`, and removes the folder
// unless something failed (then the launcher's output is printed and the logs are kept).
void launch_and_expect_simulate(const Federation& f) {
  const CliRun launch = run_cli("launch " + f.file.string() + " --quiet --timeout 500");
  ASSERT_EQ(launch.code, 0) << launch.output;
  expect_every_node_equals_simulate(f);
  if (::testing::Test::HasFailure()) std::cerr << launch.output;
  else fs::remove_all(f.dir);
}

struct Case {
  TopologyMode mode;
  int nodes;
  const char* method;
  int port;
};

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
  return std::string(to_string(info.param.mode)) + "_" + info.param.method;
}

class Loopback : public ::testing::TestWithParam<Case> {};

TEST_P(Loopback, EveryNodeMatchesTheSimulator) {
  const Case c = GetParam();
  const auto dir = test_dir("loopback");
  const Federation f = make_federation(dir, c.mode, c.nodes, c.method, c.port, method_options(c.method), small_data());

  launch_and_expect_simulate(f);
}

// A hub that lets its leaves send one at a time (receive_window = 1; docs/node.md, "Pacing")
// acknowledges the other leaves' hellos in turn, and ends with the simulator's results all the
// same; the leaves' statistics travel as streams. Ports 23720-23725.
TEST(LoopbackPacing, AStarHubPacingItsLeavesOneAtATimeMatchesTheSimulator) {
  const auto dir = test_dir("loopback_pacing");
  Federation f = make_federation(dir, TopologyMode::Star, 6, "fedcgs", 23720, method_options("fedcgs"), small_data());
  f.topology.federation.receive_window = 1;
  save_again(f);
  // The lines checked below are details: FEDNODE_LOG_LEVEL=debug, which launch passes on.
  const CliRun launch = fednode::test::run_cli("launch " + f.file.string() + " --quiet --timeout 500",
                                               "FEDNODE_LOG_LEVEL=debug OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1");
  ASSERT_EQ(launch.code, 0) << launch.output;
  expect_every_node_equals_simulate(f);
  const std::string hub_log = read_text(f.state_dir(0) / "node.log");
  EXPECT_NE(hub_log.find("pacing senders: 1 at a time"), std::string::npos) << hub_log;
  // Each leaf's 2.5 MB of statistics went as a version-2 stream (docs/protocol.md section 12):
  // the hub's ack of its hello said the hub opens them.
  for (int leaf = 1; leaf < 6; ++leaf) {
    const std::string log = read_text(f.state_dir(leaf) / "node.log");
    EXPECT_NE(log.find("opens protocol version 2: large messages to it go as streams"), std::string::npos) << log;
  }
  if (::testing::Test::HasFailure()) std::cerr << launch.output;
  else fs::remove_all(f.dir);
}

// Secure aggregation on a star of real processes (docs/privacy.md): every leaf masks its
// statistics with its pairwise keys, the hub reads only their sum, and every node ends with the
// simulator's result, which is the result without secure aggregation. Ports 23780-23789.
TEST(LoopbackSecureAggregation, AStarOfTenWithMaskedStatisticsMatchesTheSimulator) {
  const auto dir = test_dir("loopback_secagg");
  const Federation f = make_federation(dir, TopologyMode::Star, 10, "fedcgs", 23780,
                                       {{"secure-aggregation", "all"}}, small_data());
  const CliRun launch = run_cli("launch " + f.file.string() + " --quiet --timeout 500");
  ASSERT_EQ(launch.code, 0) << launch.output;
  expect_every_node_equals_simulate(f);
  // The leaves sent ring elements: 16 bytes for each of B's 784 * 785 / 2 entries, where plain
  // statistics take 8.
  for (int leaf = 1; leaf < 10; ++leaf)
    EXPECT_GT(read_json(f.state_dir(leaf) / "result.json")["knowledge_bytes_sent"].get<double>(), 16.0 * 784 * 785 / 2);
  if (::testing::Test::HasFailure()) std::cerr << launch.output;
  else fs::remove_all(f.dir);
}

// On a ring and a chain of real processes every node masks for the whole federation: the first
// pass carries sums only its last node can read, and the total comes back to every node as the
// ring's complete knowledge (a chain gains that pass). The simulator does the same, and its
// result is the plain run's (Cli.SecureAggregationChangesNoPrediction). So on a graph (seed 3's
// graph of 7 has sinks 3 and 6: 3 sends on to 6, which reads the total), with relays forwarding
// masked pieces apart. Ports 23790-23798, 23930-23936.
TEST(LoopbackSecureAggregation, ARingOfFourAChainOfFiveAndAGraphOfSevenMatchTheSimulator) {
  const auto dir = test_dir("loopback_secagg_pass");
  const Federation ring = make_federation(dir / "ring", TopologyMode::Ring, 4, "fedcgs", 23790,
                                          {{"secure-aggregation", "all"}}, small_data());
  launch_and_expect_simulate(ring);
  const Federation chain = make_federation(dir / "chain", TopologyMode::Linear, 5, "fedcgs", 23794,
                                           {{"secure-aggregation", "counts"}}, small_data());
  launch_and_expect_simulate(chain);
  const Federation graph = make_federation(dir / "graph", TopologyMode::Graph, 7, "fedcgs", 23930,
                                           {{"secure-aggregation", "all"}}, small_data());
  launch_and_expect_simulate(graph);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

// Personalised FedCGS over real processes (paper 001, Eq. 12): a star's hub sends its leaves the
// global class means with its head, a ring's nodes take them from the complete statistics, and
// every node trains its personal head on its own data once its head is final; each equals the
// simulator's. On the paper's partition: 20 % of a node's data uniform, the rest from 2 classes.
// Ports 23940-23946.
TEST(LoopbackPersonalization, AStarsLeavesAndARingsNodesTrainTheSimulatorsPersonalHeads) {
  const auto dir = test_dir("loopback_personal");
  OptionMap data = small_data();
  data.erase("dirichlet-alpha");
  data.erase("min-samples");
  data["partition"] = "dominant";
  data["uniform-share"] = "0.2";
  data["classes-per-node"] = "2";
  const OptionMap personal = {{"personalize", "true"}, {"personal-epochs", "5"}};
  const Federation star = make_federation(dir / "star", TopologyMode::Star, 4, "fedcgs", 23940, personal, data);
  const CliRun launch = run_cli("launch " + star.file.string() + " --quiet --timeout 500");
  ASSERT_EQ(launch.code, 0) << launch.output;
  expect_every_node_equals_simulate(star);
  for (NodeId id = 0; id < 4; ++id) {
    EXPECT_TRUE(fs::exists(star.state_dir(id) / "personal_head")) << id;
    EXPECT_GT(read_result(star.state_dir(id)).personal, 0.0) << id;
  }
  if (::testing::Test::HasFailure()) std::cerr << launch.output;
  else fs::remove_all(star.dir);
  const Federation ring = make_federation(dir / "ring", TopologyMode::Ring, 3, "fedcgs", 23944, personal, data);
  launch_and_expect_simulate(ring);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

// FedMITR over real processes (paper 004): a star's leaves send their ViTs to the hub, which
// sends the ensemble of them back as its head (vit-ensemble on the wire); a chain forwards the
// growing ensemble, here as float16 models, and each node distils it by sparse inversion and
// token relabelling (--receiver-head student). Every node's head equals the simulator's; so does a
// star running a user's TorchScript ViT. Ports 23950-23958.
TEST(LoopbackFedMitr, AStarAChainOfFloat16ModelsAndAScriptedStarMatchTheSimulator) {
  const auto dir = test_dir("loopback_fedmitr");
  OptionMap options = {{"client-epochs", "1"},         {"client-min-steps", "0"}, {"distill-stages", "1"},
                       {"images-per-stage", "16"},      {"inversion-iterations", "6"}, {"mask-at", "2,4"},
                       {"distill-epochs", "1"}};
  launch_and_expect_simulate(make_federation(dir / "star", TopologyMode::Star, 3, "fedmitr", 23950, options, small_data()));
  options["model-precision"] = "float16";
  options["receiver-head"] = "student";
  launch_and_expect_simulate(make_federation(dir / "chain", TopologyMode::Linear, 3, "fedmitr", 23953, options, small_data()));
  options.erase("receiver-head");
  // A user's TorchScript ViT (scripts/export_vit.py): every node loads the same file, and its
  // models travel as the file's SHA-256 and their parameters.
  options["vit-script"] = std::string(FEDNODE_SOURCE_DIR) + "/tests/data/tiny_vit.pt";
  launch_and_expect_simulate(make_federation(dir / "scripted", TopologyMode::Star, 3, "fedmitr", 23956, options, small_data()));
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

// FGL over real processes: prompts travel, every receiver draws its synthetic set from the same
// generator file (a star's hub trains its CNN and sends it to the leaves as a head), and a chain
// whose nodes run the generator as an external command (scripts/fgl_generator_command.py) ends as
// `simulate` does with the same command. Ports 24110-24115.
TEST(LoopbackFgl, AStarWithTheGeneratorFileAndAChainWithTheGeneratorCommandMatchTheSimulator) {
  const auto dir = test_dir("loopback_fgl");
  fs::create_directories(dir);
  const std::string gen = (dir / "gen.pt").string();
  const CliRun trained = run_cli("train-generator --dataset fashion-mnist --from 59000 --to 60000 --epochs 1 --width 8"
                                 " --latent 8 --quiet --out " + gen);
  ASSERT_EQ(trained.code, 0) << trained.output;
  OptionMap options = {{"generator", gen},        {"images-per-sample", "0.3"}, {"cnn-width", "4"},
                       {"cnn-hidden", "16"},      {"cnn-epochs", "1"},          {"cnn-min-steps", "40"}};
  launch_and_expect_simulate(make_federation(dir / "star", TopologyMode::Star, 3, "fgl", 24110, options, small_data()));
  options.erase("generator");
  options["generator-command"] = "/usr/bin/python3 " + std::string(FEDNODE_SOURCE_DIR) + "/scripts/fgl_generator_command.py " + gen;
  launch_and_expect_simulate(make_federation(dir / "chain", TopologyMode::Linear, 3, "fgl", 24113, options, small_data()));
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

// FedCGS's feature expansion happens in each node process, after partitioning: the nodes must
// still agree with the simulator, which expands the whole dataset at once.
TEST(LoopbackExpansion, ExpandedFedCgsChainMatchesTheSimulator) {
  const auto dir = test_dir("loopback");
  OptionMap data = small_data();
  data["feature-expansion"] = "96";
  data["feature-expansion-seed"] = "5";
  const Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedcgs", 23220, {}, data);

  launch_and_expect_simulate(f);
}

// FedPFT's shared correlation: every node sends a covariance sketch beside its mixtures, each hop
// of the chain forwards one sketch of everyone before it, truncated to the rank. The sketches
// travel encrypted in float16 like the mixtures, and every node's head must still equal the
// simulator's, which passes the same sketches in memory.
TEST(LoopbackSharedCorrelation, AChainSendingCovarianceSketchesMatchesTheSimulator) {
  const auto dir = test_dir("loopback");
  OptionMap options = method_options("fedpft");
  options["sample-correlation"] = "shared";
  options["correlation-rank"] = "6";
  const Federation f = make_federation(dir, TopologyMode::Linear, 4, "fedpft", 23240, options, small_data());

  launch_and_expect_simulate(f);
}

// FedPFT's closed-form head on real processes: a star's hub keeps the leaves' mixtures (nothing is
// drawn on arrival), chooses the shrinkage on its own rows and solves the same head as the
// simulator, whatever order the pieces came in.
TEST(LoopbackClosedFormHead, AStarSolvingItsHeadFromTheMixturesMatchesTheSimulator) {
  const auto dir = test_dir("loopback");
  OptionMap options = method_options("fedpft");
  options["head-fit"] = "lda";
  const Federation f = make_federation(dir, TopologyMode::Star, 4, "fedpft", 23250, options, small_data());

  const CliRun launch = run_cli("launch " + f.file.string() + " --quiet --timeout 500");
  ASSERT_EQ(launch.code, 0) << launch.output;
  expect_every_node_equals_simulate(f);
  const std::string hub_log = read_text(f.state_dir(f.topology.ids().front()) / "node.log");
  EXPECT_NE(hub_log.find("fedpft head: closed form (LDA of the mixtures' moments), shrinkage"), std::string::npos)
      << hub_log;
  if (!::testing::Test::HasFailure()) fs::remove_all(f.dir);
}

// A node whose projection differs (here: its own expansion seed) works in another feature space.
// The fingerprint says so, so the handshake and the knowledge are refused, and nothing is summed.
TEST(LoopbackExpansion, ANodeWithAnotherProjectionIsRefused) {
  const auto dir = test_dir("loopback");
  OptionMap data = small_data();
  data["feature-expansion"] = "32";
  Federation f = make_federation(dir, TopologyMode::Linear, 2, "fedcgs", 23230, {}, data);
  f.topology.nodes[1].data["feature-expansion-seed"] = "2";
  f.topology.federation.deadline_seconds = 4;  // node 1 waits this long for input it will refuse
  fs::remove(f.file);
  save_topology(f.topology, f.file.string());

  const CliRun launch = run_cli("launch " + f.file.string() + " --quiet --timeout 120");
  // Node 0, first in the file, was refused: launch exits with its status (docs/cli.md).
  EXPECT_EQ(launch.code, 4) << launch.output;
  const NodeOutcome refusing = read_result(f.state_dir(1));
  EXPECT_EQ(refusing.status, "incomplete");
  EXPECT_EQ(refusing.contributors, std::vector<long>{1});  // its own data only
  // The sender's part of the plan failed too, and its result says who refused it.
  EXPECT_EQ(read_result(f.state_dir(0)).status, "incomplete");
  EXPECT_EQ(int_list(field(read_json(f.state_dir(0) / "result.json"), "refused_by")), std::vector<long>{1})
      << read_text(f.state_dir(0) / "result.json");
  const std::string log = read_text(f.state_dir(1) / "node.log");
  EXPECT_NE(log.find("refused hello"), std::string::npos) << log;
  EXPECT_NE(log.find("relu-projection-32-seed-1 is not pixels+relu-projection-32-seed-2"), std::string::npos) << log;
  if (::testing::Test::HasFailure()) std::cerr << launch.output;
  else fs::remove_all(dir);
}

// A file whose key directories are empty, as the example topologies on a fresh clone: launch
// makes each node a key pair, says so, and the run completes; a second launch reuses them.
TEST(LoopbackKeys, LaunchCreatesTheKeyPairsItsNodesLack) {
  const auto dir = test_dir("loopback");
  fs::remove_all(dir);
  fs::create_directories(dir);
  TopologyBuildOptions b;
  b.mode = TopologyMode::Linear;
  b.nodes = 2;
  b.base_port = 23960;
  b.run = "test-keys-" + std::to_string(::getpid());
  b.data = {{"dataset", "fashion-mnist"}, {"train-limit", "600"}, {"test-limit", "200"}};
  b.key_root = "keys";
  b.base_dir = dir.string();
  const std::string file = (dir / "keyless.toml").string();
  save_topology(build_topology(b), file, /*allow_missing_keys=*/true);
  ASSERT_FALSE(fs::exists(dir / "keys"));

  const CliRun first = run_cli("launch " + file + " --timeout 120");
  EXPECT_EQ(first.code, 0) << first.output;
  for (const std::string n : {"n0", "n1"}) {
    EXPECT_NE(first.output.find("created a key pair for node " + std::string(1, n[1]) + " (" + n + ") in "),
              std::string::npos) << first.output;
    EXPECT_TRUE(fs::exists(dir / "keys" / n / "node.key")) << n;
    EXPECT_TRUE(fs::exists(dir / "keys" / n / "node.pub")) << n;
  }
  const std::string key = read_text(dir / "keys" / "n0" / "node.pub");
  const CliRun again = run_cli("launch " + file + " --timeout 120");
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(again.output.find("created a key pair"), std::string::npos) << again.output;
  EXPECT_EQ(read_text(dir / "keys" / "n0" / "node.pub"), key);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, Loopback,
    ::testing::Values(Case{TopologyMode::Linear, 5, "fedcgs", 23100}, Case{TopologyMode::Linear, 5, "fedpft", 23110},
                      Case{TopologyMode::Linear, 5, "fedtc", 23120}, Case{TopologyMode::Ring, 4, "fedcgs", 23130},
                      Case{TopologyMode::Ring, 4, "fedpft", 23140}, Case{TopologyMode::Ring, 4, "fedtc", 23150},
                      Case{TopologyMode::Star, 9, "fedcgs", 23160}, Case{TopologyMode::Star, 9, "fedpft", 23170},
                      Case{TopologyMode::Star, 9, "fedtc", 23180}, Case{TopologyMode::Graph, 4, "fedcgs", 23190},
                      Case{TopologyMode::Graph, 4, "fedpft", 23200}, Case{TopologyMode::Graph, 4, "fedtc", 23210}),
    name_of);

}  // namespace
}  // namespace fednode::testing_network
