// The run a topology names ([federation] run and its default), and the key directories that
// `fednode keygen` writes as topology files read them.
#include "helpers.h"

#include "crypto/key_files.h"
#include "topology/builders.h"

#include <fstream>

namespace fednode {
namespace {

using test::federation;
using test::nodes;

TEST(TopologyRun, IsReadWrittenAndKeptByRoundTrips) {
  const Topology t = test::parse(federation("linear", "run = \"exp-7 (retry)\"") + nodes(2) + test::edges({{0, 1}}));
  ASSERT_TRUE(t.federation.run);
  EXPECT_EQ(*t.federation.run, "exp-7 (retry)");
  EXPECT_EQ(run_name(t), "exp-7 (retry)");
  const std::string printed = to_toml(t);
  EXPECT_NE(printed.find("run = \"exp-7 (retry)\"\n"), std::string::npos) << printed;
  EXPECT_EQ(run_name(test::parse(printed)), "exp-7 (retry)");
}

TEST(TopologyRun, DefaultNameFollowsTheContentNotTheLayout) {
  const std::string text = federation("linear") + nodes(2) + test::edges({{0, 1}});
  const Topology t = test::parse(text);
  EXPECT_FALSE(t.federation.run);
  const std::string name = run_name(t);
  ASSERT_EQ(name.size(), 5u + 64u) << name;
  EXPECT_EQ(name.substr(0, 5), "file:");
  EXPECT_EQ(name.find_first_not_of("0123456789abcdef", 5), std::string::npos) << name;
  EXPECT_EQ(to_toml(t).find("run ="), std::string::npos);  // the default is never written

  // Comments and blank lines are not the federation: every node reading either text agrees.
  EXPECT_EQ(run_name(test::parse("# another copy\n\n" + text)), name);
  // Anything that changes the federation changes the run.
  EXPECT_NE(run_name(test::parse(federation("linear", "seed = 1") + nodes(2) + test::edges({{0, 1}}))), name);
  Topology other = t;
  other.nodes[1].address = "tcp://127.0.0.1:7999";
  EXPECT_NE(run_name(other), name);
}

TEST(TopologyRun, BadNamesAreNamedErrors) {
  const std::string rest = nodes(1);
  EXPECT_ERROR(federation("linear", "run = \"\"") + rest, "t.toml:4: [federation] run is empty");
  EXPECT_ERROR(federation("linear", "run = \"" + std::string(129, 'r') + "\"") + rest,
               "[federation] run is 129 characters long, at most 128 are allowed");
  EXPECT_NO_THROW(test::parse(federation("linear", "run = \"" + std::string(128, 'r') + "\"") + rest));
  EXPECT_ERROR(federation("linear", "run = \"a\\tb\"") + rest,
               "[federation] run has character 2 (byte 0x09), which is not printable ASCII");
  EXPECT_ERROR(federation("linear", "run = \"caf\u00e9\"") + rest, "character 4 (byte 0xc3)");
  EXPECT_ERROR(federation("linear", "run = 5") + rest, "[federation]: 'run' must be a string, got an integer");
  EXPECT_EQ(run_name_problem("run-0123456789abcdef"), "");
  EXPECT_NE(run_name_problem("a\nb"), "");

  // A topology built in memory is checked the same way.
  Topology t = test::parse(federation("linear") + rest);
  t.federation.run = std::string("\x7f");
  test::expect_input_error([&] { validate_topology(t); }, {"byte 0x7f"});
}

TEST(TopologyRun, BuildersWriteTheRunTheyAreGiven) {
  TopologyBuildOptions o;
  o.mode = TopologyMode::Ring;
  o.nodes = 3;
  o.public_key = keys_from_map({{0, test::key_hex(0)}, {1, test::key_hex(1)}, {2, test::key_hex(2)}});
  EXPECT_FALSE(build_topology(o).federation.run);
  o.run = "run-00112233aabbccdd";
  const Topology t = build_topology(o);
  EXPECT_EQ(run_name(t), "run-00112233aabbccdd");
  EXPECT_EQ(run_name(test::parse(to_toml(t))), "run-00112233aabbccdd");
  o.run = std::string(200, 'x');
  EXPECT_THROW(build_topology(o), InputError);
}

// topology/ spells the public key file itself (it does not include crypto headers); both must
// name the file keygen writes.
TEST(TopologyKeys, ReadTheDirectoriesKeygenWrites) {
  EXPECT_STREQ(kNodePublicKeyFile, kPublicKeyFile);
  test::TempDir dir;
  const PublicKey k0 = write_new_identity(dir / "keys/n0");
  const PublicKey k1 = write_new_identity(dir / "keys/n1");
  const std::string text = federation("linear") +
                           "[[node]]\nid = 0\naddress = \"tcp://127.0.0.1:7000\"\nkey_dir = \"keys/n0\"\n\n"
                           "[[node]]\nid = 1\naddress = \"tcp://127.0.0.1:7001\"\nkey_dir = \"keys/n1\"\n\n" +
                           test::edges({{0, 1}});
  { std::ofstream(dir / "t.toml") << text; }
  const Topology t = load_topology(dir / "t.toml");  // keys required
  ASSERT_TRUE(t.node(0).public_key && t.node(1).public_key);
  EXPECT_EQ(PublicKey{*t.node(0).public_key}, k0);
  EXPECT_EQ(PublicKey{*t.node(1).public_key}, k1);
}

}  // namespace
}  // namespace fednode
