// fednode keygen and fednode topology, run in-process through the same dispatch as the
// executable (commands() and run_guarded): exit codes, files, and what loads them back.
#include "core/options.h"
#include "cli/commands.h"
#include "crypto/key_files.h"
#include "topology/topology.h"

#include "../common/temp_dir.h"

#include "node/node_config.h"
#include "methods/fgl/fgl_options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

namespace fednode {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out, err;
};

Result run_command(const std::string& name, const std::vector<std::string>& args) {
  for (const auto& c : cli::commands()) {
    if (name != c.name) continue;
    std::ostringstream out, err;
    auto* saved_out = std::cout.rdbuf(out.rdbuf());
    auto* saved_err = std::cerr.rdbuf(err.rdbuf());
    Result r;
    r.code = cli::run_guarded(c, args);
    std::cout.rdbuf(saved_out);
    std::cerr.rdbuf(saved_err);
    r.out = out.str();
    r.err = err.str();
    return r;
  }
  ADD_FAILURE() << "no command named " << name;
  return {};
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class KeysAndTopology : public ::testing::Test {
 protected:
  std::string at(const std::string& p) const { return (dir_ / p).string(); }

  test::TempDir tmp_{"fednode_cli_keys"};
  fs::path dir_ = tmp_.path();
};

TEST_F(KeysAndTopology, KeygenWritesAPrivateKeyAndPrintsThePublicOne) {
  const Result r = run_command("keygen", {"--out", at("k")});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(r.out.size(), 65u) << r.out;  // 64 hex digits and a newline, nothing else: scripts capture it
  EXPECT_EQ(r.out.find_first_not_of("0123456789abcdef"), 64u);
  EXPECT_EQ(read_file(at("k/node.pub")), r.out);
  const auto perms = fs::status(at("k/node.key")).permissions();
  EXPECT_EQ(perms & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(load_identity(at("k")).public_key().to_hex() + "\n", r.out);

  const std::string key_before = read_file(at("k/node.key"));
  const Result again = run_command("keygen", {"--out=" + at("k")});
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find("already exists; refusing to overwrite"), std::string::npos) << again.err;
  EXPECT_EQ(read_file(at("k/node.key")), key_before);

  const Result missing = run_command("keygen", {});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("--out"), std::string::npos) << missing.err;
  EXPECT_EQ(run_command("keygen", {"--help"}).code, 0);
}

TEST_F(KeysAndTopology, EveryModeWritesAFileThatLoadsWithItsKeys) {
  std::set<std::string> runs;
  for (const std::string mode : {"linear", "ring", "star", "graph"}) {
    SCOPED_TRACE(mode);
    const std::string file = at("conf/" + mode + ".toml");
    const Result r = run_command("topology", {mode, "--nodes", "5", "--out", file, "--method", "fedcgs", "--seed", "4",
                                              "--base-port", "7400", "--deadline", "60", "--option", "shrinkage=0.1",
                                              "--data", "dataset=fashion-mnist", "--data=train-limit=600"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote " + file), std::string::npos) << r.out;

    const Topology t = load_topology(file);  // keys required
    EXPECT_STREQ(to_string(t.federation.mode), mode.c_str());
    EXPECT_EQ(t.federation.method, "fedcgs");
    EXPECT_EQ(t.federation.seed, 4u);
    EXPECT_EQ(t.federation.deadline_seconds, 60.0);
    EXPECT_EQ(t.federation.options, (OptionMap{{"shrinkage", "0.1"}}));
    EXPECT_EQ(t.federation.data, (OptionMap{{"dataset", "fashion-mnist"}, {"train-limit", "600"}}));
    ASSERT_EQ(t.nodes.size(), 5u);
    for (const auto& n : t.nodes) {
      // The file names directories; each holds a whole key pair whose public half the file loaded.
      EXPECT_EQ(n.key_dir, "keys/n" + std::to_string(n.id));
      EXPECT_TRUE(n.public_key_text.empty());
      ASSERT_TRUE(n.public_key) << n.id;
      EXPECT_EQ(PublicKey{*n.public_key}, load_identity(t.key_dir_of(n.id)).public_key());
      EXPECT_EQ(n.address, "tcp://127.0.0.1:" + std::to_string(7400 + n.id));
    }
    ASSERT_TRUE(t.federation.run);
    const std::string run = run_name(t);
    EXPECT_EQ(run.size(), 20u) << run;
    EXPECT_EQ(run.substr(0, 4), "run-");
    runs.insert(run);
  }
  EXPECT_EQ(runs.size(), 4u);  // a new run name for every file
  // The second file found the first one's keys and reused them.
  EXPECT_EQ(load_topology(at("conf/ring.toml")).node(3).public_key,
            load_topology(at("conf/linear.toml")).node(3).public_key);
}

TEST_F(KeysAndTopology, RefusesToOverwriteAFileAndKeepsExistingKeys) {
  const std::string file = at("ring.toml");
  ASSERT_EQ(run_command("topology", {"ring", "--nodes", "3", "--out", file}).code, 0);
  const std::string text = read_file(file), key = read_file(at("keys/n1/node.key"));
  const Result again = run_command("topology", {"ring", "--nodes", "3", "--out", file});
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find(file + " already exists"), std::string::npos) << again.err;
  EXPECT_EQ(read_file(file), text);

  // A new file over the same key directories: reused, never overwritten.
  const Result star = run_command("topology", {"star", "--nodes", "4", "--out", at("star.toml")});
  ASSERT_EQ(star.code, 0) << star.err;
  EXPECT_NE(star.err.find("1 new, 3 reused"), std::string::npos) << star.err;
  EXPECT_EQ(read_file(at("keys/n1/node.key")), key);

  // A key directory that is half a key pair is refused, not completed or replaced.
  fs::remove(at("keys/n2/node.pub"));
  const Result broken = run_command("topology", {"linear", "--nodes", "3", "--out", at("linear.toml")});
  EXPECT_EQ(broken.code, 1);
  EXPECT_NE(broken.err.find("no node.pub"), std::string::npos) << broken.err;
}

TEST_F(KeysAndTopology, WritesToStdoutWithPathsAndRunAsGiven) {
  const Result r = run_command("topology", {"linear", "--nodes", "2", "--keys", at("k"), "--state", at("s"), "--run",
                                            "exp 7", "--host", "10.0.0.5", "--method", "fedtc"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Topology t = parse_topology(r.out, "<stdout>");  // keys required: absolute key_dirs
  EXPECT_EQ(run_name(t), "exp 7");
  EXPECT_EQ(t.key_dir_of(1), at("k/n1"));
  EXPECT_EQ(t.state_dir_of(1), at("s/n1"));
  EXPECT_EQ(t.node(1).address, "tcp://10.0.0.5:7001");
  EXPECT_TRUE(t.node(0).public_key && t.node(1).public_key);

  // Relative directories are relative to the current directory, and the file names them
  // relative to itself.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  const Result rel = run_command("topology", {"star", "--nodes", "2", "--keys", "ks", "--out", "conf/star.toml",
                                              "--data", "train-features=conf/X.npy", "--data", "test-labels=yt.npy"});
  const Result model = run_command("topology", {"linear", "--nodes", "2", "--keys", "ks", "--out", "conf/chain.toml",
                                                "--data", "dataset=fashion-mnist", "--data", "backbone=m/b.pt"});
  const Result generator = run_command("topology", {"linear", "--nodes", "2", "--keys", "ks", "--out", "conf/fgl.toml",
                                                    "--method", "fgl", "--option", "generator=m/gen.pt"});
  fs::current_path(cwd);
  // A method's files (FGL's generator, FedMITR's TorchScript ViT) likewise.
  ASSERT_EQ(generator.code, 0) << generator.err;
  const Topology fgl = load_topology(at("conf/fgl.toml"));
  EXPECT_EQ(fgl.options_for(0).at("generator"), "../m/gen.pt");
  EXPECT_EQ(fs::path(own_options<FglOptions>(method_options_for(fgl, 0)).generator).lexically_normal(), fs::path(at("m/gen.pt")));
  ASSERT_EQ(model.code, 0) << model.err;
  EXPECT_EQ(load_topology(at("conf/chain.toml")).data_for(0).at("backbone"), "../m/b.pt");
  ASSERT_EQ(rel.code, 0) << rel.err;
  const Topology star = load_topology(at("conf/star.toml"));
  EXPECT_EQ(star.node(1).key_dir, "../ks/n1");
  // Data files too: the nodes resolve them against the file.
  const OptionMap data = star.data_for(1);
  EXPECT_EQ(data.at("train-features"), "X.npy");
  EXPECT_EQ(data.at("test-labels"), "../yt.npy");
  EXPECT_EQ(fs::path(star.resolve(data.at("train-features"))).lexically_normal(), fs::path(at("conf/X.npy")));
  EXPECT_TRUE(fs::exists(at("ks/n1/node.key")));
  EXPECT_EQ(star.node(1).state_dir, "state/n1");
}

// A file for LAN discovery: no node has an address, and so the hops are CurveZMQ.
TEST_F(KeysAndTopology, NoAddressesForDiscovery) {
  const std::string file = at("lab.toml");
  const Result r = run_command("topology", {"linear", "--nodes", "3", "--no-addresses", "--out", file});
  ASSERT_EQ(r.code, 0) << r.err;
  const Topology t = load_topology(file);
  for (const auto& n : t.nodes) EXPECT_EQ(n.address, "") << n.id;
  EXPECT_EQ(t.hop_encryption(), HopEncryption::Curve);
}

// Sites behind NAT: the named nodes accept no connections, and a relay with a key pair of its own
// joins those that must talk.
TEST_F(KeysAndTopology, NodesBehindNatAndTheirRelay) {
  const std::string file = at("sites.toml");
  const Result r = run_command("topology", {"linear", "--nodes", "4", "--nat", "0,1,3", "--relay",
                                            "tcp://127.0.0.1:7310", "--out", file});
  ASSERT_EQ(r.code, 0) << r.err;
  const Topology t = load_topology(file);
  for (const auto& n : t.nodes) {
    EXPECT_EQ(n.reachable, n.id == 2) << n.id;
    EXPECT_EQ(n.address.empty(), n.id != 2) << n.id;
  }
  ASSERT_EQ(t.relays.size(), 1u);
  EXPECT_EQ(t.relays[0].name, "r1");
  EXPECT_EQ(t.relays[0].address, "tcp://127.0.0.1:7310");
  EXPECT_TRUE(t.relays[0].public_key);
  EXPECT_TRUE(fs::exists(at("keys/r1/node.key")));
}

TEST_F(KeysAndTopology, BadArgumentsAreUsageErrorsNamingTheOption) {
  const std::string out = at("t.toml");
  struct Case {
    std::vector<std::string> args;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{"mesh", "--nodes", "3"}, "unknown topology mode 'mesh'"},
      {{"--nodes", "3"}, "name the topology first"},
      {{"linear"}, "--nodes"},
      {{"ring", "--nodes", "1"}, "--nodes: a ring needs at least 2 nodes"},
      {{"linear", "--nodes", "16385"}, "--nodes must be in [1, 16384]"},
      {{"graph", "--nodes", "1025"}, "a graph topology needs 1 to 1024 nodes"},
      {{"linear", "--nodes", "three"}, "--nodes expects an integer"},
      {{"linear", "--nodes", "3", "--method", "fedavg"}, "--method must be fedpft, fedcgs, fedtc, fedmitr or fgl, got 'fedavg'"},
      {{"linear", "--nodes", "3", "--base-port", "65534"}, "--base-port 65534"},
      {{"linear", "--nodes", "3", "--deadline", "0"}, "--deadline must be in [0.001, 604800], got 0"},
      {{"linear", "--nodes", "3", "--run", ""}, "--run is empty"},
      {{"linear", "--nodes", "3", "--no-addresses", "--host", "10.0.0.1"}, "--no-addresses leaves --host and --base-port"},
      {{"linear", "--nodes", "3", "--nat", "all"}, "--nat: nodes 0 and 1 exchange messages and neither accepts connections"},
      {{"linear", "--nodes", "3", "--nat", "0,7"}, "--nat: '7' is not a node id of this topology"},
      {{"linear", "--nodes", "3", "--relay", "tcp://10.0.0.1:7310"}, "--relay is where --nat nodes meet"},
      {{"linear", "--nodes", "3", "--nat", "all", "--relay", "tcp://10.0.0.1"}, "--nat/--relay: "},
      {{"linear", "--nodes", "3", "--run", std::string(129, 'r')}, "--run is 129 characters long"},
      {{"linear", "--nodes", "3", "--run", "tab\there"}, "--run has character 4 (byte 0x09)"},
      {{"linear", "--nodes", "3", "--option", "components"}, "--option expects KEY=VALUE, got 'components'"},
      {{"linear", "--nodes", "3", "--option", "compnents=3"}, "--option compnents is not a method option"},
      {{"linear", "--nodes", "3", "--option", "components=0"}, "--option: --components must be in [1, 1000]"},
      {{"linear", "--nodes", "3", "--option", "covariance=round"}, "--option: "},
      {{"linear", "--nodes", "3", "--option", "dp=yes"}, "--option dp is a flag"},
      {{"linear", "--nodes", "3", "--option", "method=fedtc"}, "--option method"},
      {{"linear", "--nodes", "3", "--option", "tol=1", "--option", "tol=2"}, "--option tol given twice"},
      {{"linear", "--nodes", "3", "--data", "=x"}, "--data expects KEY=VALUE"},
      {{"linear", "--nodes", "3", "--data", "a.b=1"}, "--data a.b is not a data or partition option"},
      {{"linear", "--nodes", "3", "--data", "partition=foo"}, "--data: unknown partition scheme 'foo'"},
      {{"linear", "--nodes", "3", "--data", "partition=dirichlet", "--data", "dirichlet-alpha=-1"},
       "--data: --dirichlet-alpha must be in"},
      {{"linear", "--nodes", "3", "--data", "dirichlet-alpha=0.3"}, "--dirichlet-alpha is a parameter of --partition dirichlet"},
      {{"linear", "--nodes", "3", "--data", "train-limit=0"}, "--train-limit must be in [1, "},
      {{"linear", "--nodes", "3", "--data", "dataset=mnist"}, "--data: --dataset must be fashion-mnist"},
      {{"linear", "--nodes", "3", "--data", "dataset=fashion-mnist", "--data", "train-features=X.npy"},
       "--data: give either --dataset or the four .npy files"},
      {{"linear", "--nodes", "3", "--data", "train-features="}, "--data train-features needs a file"},
      {{"linear", "--nodes", "3", "--host", "bad host"}, "host 'bad host': the host contains ' '"},
      {{"linear", "--nodes", "3", "--keys", ""}, "--keys needs a path"},
      {{"linear", "--nodes", "3", "--out", ""}, "--out needs a file name"},
      {{"linear", "--nodes", "3", "--seed", "-1"}, "--seed must be in"},
      {{"linear", "--nodes", "3", "--nods", "3"}, "unknown option --nods"},
      {{"linear", "--nodes", "3", "--out", out, "--out", out}, "option --out given twice"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    if (std::find(args.begin(), args.end(), "--out") == args.end()) {
      args.push_back("--out");
      args.push_back(out);
    }
    const Result r = run_command("topology", args);
    EXPECT_EQ(r.code, 2) << c.fragment << ": " << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << r.err;
  }
  // None of these wrote a file or a key (the default key directory is keys/ beside the file).
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(at("keys")));
  EXPECT_EQ(run_command("topology", {"--help"}).code, 0);
}

TEST(CliArgs, RepeatedOptionsKeepEveryValueInOrder) {
  const Args a({"--data", "a=1", "--x", "5", "--data=b=2", "--data", "a=3"}, {"x"}, {}, {"data"});
  EXPECT_EQ(a.all("data"), (std::vector<std::string>{"a=1", "b=2", "a=3"}));
  EXPECT_TRUE(a.has("data"));
  EXPECT_TRUE(a.all("x").empty());
  EXPECT_FALSE(Args({}, {"x"}, {}, {"data"}).has("data"));
  EXPECT_THROW(Args({"--x", "1", "--x", "2"}, {"x"}, {}, {"data"}), UsageError);
  EXPECT_THROW(Args({"--data"}, {"x"}, {}, {"data"}), UsageError);
}

}  // namespace
}  // namespace fednode
