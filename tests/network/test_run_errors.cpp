// `fednode run` and `fednode launch` on bad input: each mistake is one clear line naming the
// file, node or option, with exit status 1 (bad input), 2 (bad command line) or 5 (an address
// that cannot be listened on), and no node starts.
#include "federation.h"

#include "../common/expect_error.h"
#include "features/idx.h"
#include "node/node.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

namespace fednode::testing_network {
namespace {

class RunErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    f_ = make_federation(test_dir("run_errors"), TopologyMode::Linear, 2, "fedcgs", 23700, {{"shrinkage", "0.5"}},
                         {{"dataset", "fashion-mnist"}, {"train-limit", "500"}, {"test-limit", "100"}});
  }
  void TearDown() override { fs::remove_all(f_.dir); }

  // A copy of the topology file with `from` replaced by `to`.
  std::string edited(const std::string& from, const std::string& to) {
    std::string text = read_text(f_.file);
    text = std::regex_replace(text, std::regex(from), to);
    const fs::path p = f_.dir / ("edited" + std::to_string(++edits_) + ".toml");
    std::ofstream(p) << text;
    return p.string();
  }

  Federation f_;
  int edits_ = 0;
};

TEST_F(RunErrors, EachMistakeIsNamed) {
  struct Case {
    std::string args;
    int code;
    std::string says;
  };
  const std::string file = f_.file.string();
  const std::vector<Case> cases = {
      {"run --topology " + (f_.dir / "missing.toml").string() + " --id 0", 1, "missing.toml"},
      {"run --topology " + file + " --id n7", 1, "no node has name 'n7'"},
      {"run --topology " + file, 2, "--id"},
      {"run --topology " + file + " --id 0 --bogus 1", 2, "--bogus"},
      {"run --topology " + edited("shrinkage = 0.5", "shrinkag = 0.5") + " --id 1 --quiet", 1, "unknown option 'shrinkag'"},
      {"run --topology " + edited("shrinkage = 0.5", "shrinkage = \"five\"") + " --id 1 --quiet", 1, "'five'"},
      {"run --topology " + edited("shrinkage = 0.5", "partition = \"labels\"") + " --id 1 --quiet", 1,
       "unknown option 'partition' among the method options of node 1 (n1) (a data setting"},
      {"run --topology " + edited("shrinkage = 0.5", "components = 5") + " --id 1 --quiet", 1,
       "--components is a fedpft option; the method is fedcgs"},
      {"run --topology " + edited("dataset = \"fashion-mnist\"", "dataset = \"cifar\"") + " --id 1 --quiet", 1, "cifar"},
      {"run --topology " + edited("shrinkage = 0.5", "shrinkage = 0.5\n[federation.limits]\nmax_dimension = 5") +
           " --id 1 --quiet", 1, "[federation.limits]: 'max_dimension' is not a protocol limit (the limits: max_message_bytes, max_dim,"},
      {"run --topology " + edited("shrinkage = 0.5", "shrinkage = 0.5\n[federation.limits]\nmax_dim = \"wide\"") +
           " --id 1 --quiet", 1, "[federation.limits] max_dim must be a whole number, got 'wide'"},
      {"run --topology " + edited("shrinkage = 0.5", "shrinkage = 0.5\n[federation.limits]\nmax_depth = 3") +
           " --id 1 --quiet", 1, "[federation.limits]: protocol limit max_depth = 3 must lie in [6, 64]"},
      {"launch", 2, "topology file"},
      {"launch " + (f_.dir / "missing.toml").string(), 1, "missing.toml"},
  };
  for (const auto& c : cases) {
    const CliRun r = run_cli(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << "one line: " << r.output;
  }
}

TEST_F(RunErrors, AnotherRunsStateDirectoryIsRefused) {
  // A state directory written by a run with another name is not taken over.
  const std::string renamed = edited("run = \"[^\"]*\"", "run = \"another-run\"");
  fs::create_directories(f_.state_dir(1));
  std::ofstream(f_.state_dir(1) / "run") << "00112233445566778899aabbccddeeff\n";
  const CliRun r = run_cli("run --quiet --topology " + renamed + " --id 1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("belongs to run"), std::string::npos) << r.output;
}

// Another program holds the node's port: the status says it is the network (5), not the file.
TEST_F(RunErrors, AnAddressInUseExitsWithTheNetworkStatus) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(23701);  // node 1's port (make_federation: base port + id)
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at), 0) << "port 23701 is taken";
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_NE(read_text(f_.file).find("127.0.0.1:23701"), std::string::npos) << read_text(f_.file);
  const CliRun r = run_cli("run --quiet --topology " + f_.file.string() + " --id 1");
  ::close(fd);
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_NE(r.output.find("cannot listen on 'tcp://127.0.0.1:23701'"), std::string::npos) << r.output;
}

// The topology file's [federation.limits] reach the node: 1 MiB is below what node 0's FedCGS
// statistics of 784 pixels need, and the sender says so before anything is sent.
TEST_F(RunErrors, TheFilesLimitsAreTheNodesLimits) {
  const std::string limited = edited("shrinkage = 0.5", "shrinkage = 0.5\n[federation.limits]\nmax_message_bytes = 1048576");
  const CliRun r = run_cli("run --quiet --topology " + limited + " --id 0");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("above max_message_bytes (1048576)"), std::string::npos) << r.output;
}

// A message larger than receivers accept would be dropped by their transport, and so would every
// resend: the sender stops with an error that says which message, how large, and what to change.
TEST_F(RunErrors, KnowledgeAboveTheMessageLimitIsNamedAtTheSender) {
  NodeConfig config;
  config.topology = f_.topology;
  config.id = 0;
  config.run_name = run_name(config.topology);
  config.method.method = "fedcgs";
  config.local = load_fashion_mnist(default_fashion_mnist_dir(), "train", 200);
  config.state_dir = (f_.dir / "state_limit").string();
  config.limits.max_message_bytes = 1 << 20;  // FedCGS on pixels sends a 784 x 784 float64 Gram matrix
  Node node(std::move(config), load_identity(f_.topology.key_dir_of(0)));
  test::expect_input_error(
      [&] {
        for (int i = 0; i < 50 && !node.step(std::chrono::milliseconds(100)); ++i) {
        }
      },
      {"knowledge message for node 1", "above max_message_bytes (1048576)", "raise the limit at every node (Limits::max_message_bytes"});
}

}  // namespace
}  // namespace fednode::testing_network

namespace fednode::testing_network {
namespace {

// FEDNODE_LOG_LEVEL: at "warning" a node whose sender never comes says only the warning (and its
// incomplete result, a warning too), none of its information lines; a word that is no level
// stops the command naming the variable.
TEST_F(RunErrors, TheLogLevelChoosesTheLines) {
  set_deadline(f_, 1);
  const std::string run = "run --topology " + f_.file.string() + " --id 1";
  const CliRun warned = fednode::test::run_cli(run, "FEDNODE_LOG_LEVEL=warning OMP_NUM_THREADS=1");
  EXPECT_EQ(warned.code, 3) << warned.output;  // incomplete: node 0 never ran
  EXPECT_NE(warned.output.find("warning: node 0 (n0) missed the deadline of 1 s"), std::string::npos) << warned.output;
  EXPECT_NE(warned.output.find("warning: incomplete"), std::string::npos) << warned.output;
  EXPECT_EQ(warned.output.find("loading data"), std::string::npos) << warned.output;
  EXPECT_EQ(warned.output.find("hops:"), std::string::npos) << warned.output;
  const CliRun bad = fednode::test::run_cli(run, "FEDNODE_LOG_LEVEL=loud");
  EXPECT_EQ(bad.code, 1) << bad.output;
  EXPECT_NE(bad.output.find("FEDNODE_LOG_LEVEL is 'loud'; expected error, warning, info or debug"), std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace fednode::testing_network
