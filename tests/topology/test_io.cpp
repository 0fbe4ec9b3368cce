// Reading and writing topology files: fields, references by name, option texts, round trips,
// key directories, and the errors of the TOML layer.
#include "helpers.h"
#include "topology/toml_guard.h"

#include <fstream>
#include <typeinfo>
#include <sstream>

namespace fednode {
namespace {

using test::error_of;
using test::key_hex;

const std::string kFull = R"(# a complete star
[federation]
mode = "star"
method = "fedpft"
seed = 42
deadline_seconds = 90.5
hub = "hub"

[federation.options]
components = 5
covariance = "diag"
reg-covar = 1e-06
dp = false
head-lr = 0.1

[federation.data]
dataset = "fashion-mnist"
partition = "dirichlet"
dirichlet-alpha = 0.5

[federation.limits]
max_message_bytes = 536870912
max_dim = 4096

[[node]]
id = 0
name = "hub"
address = "tcp://127.0.0.1:7000"
bind = "tcp://*:7000"
public_key = ")" + key_hex(0) + R"("
key_dir = "keys/hub"
state_dir = "state/hub"
partition_index = 1

[node.options]
head-epochs = 50

[[node]]
id = 1
name = "left"
address = "tcp://[::1]:7001"
public_key = ")" + key_hex(1) + R"("
partition_index = 0

[node.data]
train-features = "left/X.npy"
train-labels = "left/y.npy"

[[node]]
id = 7
address = "tcp://Edge-7.LAN:7007"
public_key = ")" + key_hex(7) + R"("

[[edge]]
from = "left"
to = "hub"

[[edge]]
from = 7
to = 0
)";

TEST(TopologyIo, ReadsEveryField) {
  const Topology t = test::parse(kFull);
  EXPECT_EQ(t.federation.mode, TopologyMode::Star);
  EXPECT_EQ(t.federation.method, "fedpft");
  EXPECT_EQ(t.federation.seed, 42u);
  EXPECT_DOUBLE_EQ(t.federation.deadline_seconds, 90.5);
  ASSERT_TRUE(t.federation.hub);
  EXPECT_EQ(*t.federation.hub, 0u);
  EXPECT_EQ(t.federation.line, 2);
  EXPECT_EQ(t.federation.options.at("components"), "5");
  EXPECT_EQ(t.federation.options.at("reg-covar"), "1e-06");
  EXPECT_EQ(t.federation.options.at("dp"), "false");
  EXPECT_EQ(t.federation.options.at("head-lr"), "0.1");
  EXPECT_EQ(t.federation.data.at("dirichlet-alpha"), "0.5");
  EXPECT_EQ(t.federation.limits.at("max_dim"), "4096");
  ASSERT_EQ(t.nodes.size(), 3u);
  const auto& hub = t.node(0);
  EXPECT_EQ(hub.name, "hub");
  EXPECT_EQ(hub.bind, "tcp://*:7000");
  EXPECT_EQ(hub.line, 25);  // the [[node]] header
  ASSERT_TRUE(hub.public_key);
  EXPECT_EQ(public_key_hex(*hub.public_key), key_hex(0));
  EXPECT_EQ(t.state_dir_of(0), "state/hub");
  EXPECT_EQ(t.key_dir_of(0), "keys/hub");
  EXPECT_EQ(t.partition_index(0), 1);
  EXPECT_EQ(t.partition_index(1), 0);
  EXPECT_EQ(t.partition_index(7), 2);  // its rank among the ids 0, 1, 7
  EXPECT_EQ(t.options_for(0).at("head-epochs"), "50");
  EXPECT_EQ(t.options_for(0).at("components"), "5");
  EXPECT_EQ(t.options_for(1).count("head-epochs"), 0u);
  EXPECT_EQ(t.data_for(1).at("train-features"), "left/X.npy");
  // Its own files replace the shared dataset: the data options take one source, never both.
  EXPECT_EQ(t.data_for(1).count("dataset"), 0u);
  EXPECT_EQ(t.data_for(0).at("dataset"), "fashion-mnist");
  EXPECT_EQ(t.state_dir_of(7), "state/n7");
  ASSERT_EQ(t.edges.size(), 2u);
  EXPECT_EQ(t.edges[0].from, 1u);  // "left" resolved to its id
  EXPECT_EQ(t.edges[0].to, 0u);
  EXPECT_EQ(t.lookup("left").id, 1u);
  EXPECT_EQ(t.lookup("7").id, 7u);
  EXPECT_EQ(t.describe(1), "node 1 (left)");
  EXPECT_THROW(t.lookup("right"), InputError);
  EXPECT_THROW(t.lookup("3"), InputError);
}

TEST(TopologyIo, PrintThenParseGivesTheSameTopology) {
  const Topology a = test::parse(kFull);
  const std::string printed = to_toml(a);
  const Topology b = test::parse(printed);
  EXPECT_EQ(to_toml(b), printed);
  EXPECT_EQ(b.federation.options, a.federation.options);
  EXPECT_EQ(b.federation.data, a.federation.data);
  EXPECT_EQ(b.federation.limits, a.federation.limits);
  EXPECT_EQ(b.federation.limits, (OptionMap{{"max_dim", "4096"}, {"max_message_bytes", "536870912"}}));
  EXPECT_EQ(b.federation.deadline_seconds, a.federation.deadline_seconds);
  ASSERT_EQ(b.nodes.size(), a.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(b.nodes[i].id, a.nodes[i].id);
    EXPECT_EQ(b.nodes[i].name, a.nodes[i].name);
    EXPECT_EQ(b.nodes[i].address, a.nodes[i].address);
    EXPECT_EQ(b.nodes[i].bind, a.nodes[i].bind);
    EXPECT_EQ(b.nodes[i].public_key, a.nodes[i].public_key);
    EXPECT_EQ(b.nodes[i].key_dir, a.nodes[i].key_dir);
    EXPECT_EQ(b.nodes[i].state_dir, a.nodes[i].state_dir);
    EXPECT_EQ(b.nodes[i].partition_index, a.nodes[i].partition_index);
    EXPECT_EQ(b.nodes[i].options, a.nodes[i].options);
    EXPECT_EQ(b.nodes[i].data, a.nodes[i].data);
  }
  ASSERT_EQ(b.edges.size(), a.edges.size());
  for (size_t i = 0; i < a.edges.size(); ++i) {
    EXPECT_EQ(b.edges[i].from, a.edges[i].from);
    EXPECT_EQ(b.edges[i].to, a.edges[i].to);
  }
  // Typed values stay typed where that reads back the same, and become strings otherwise.
  EXPECT_NE(printed.find("components = 5\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("reg-covar = 1e-06\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("dp = false\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("deadline_seconds = 90.5\n"), std::string::npos) << printed;
}

TEST(TopologyIo, WholeDeadlinesPrintAsWholeNumbers) {
  Topology t = test::parse(test::federation("linear") + test::nodes(1));
  for (double seconds : {300.0, 1.0, 604800.0, 0.25}) {
    t.federation.deadline_seconds = seconds;
    const std::string printed = to_toml(t);
    EXPECT_EQ(printed.find("e+"), std::string::npos) << printed;
    EXPECT_EQ(test::parse(printed).federation.deadline_seconds, seconds);
  }
  t.federation.deadline_seconds = 300;
  EXPECT_NE(to_toml(t).find("deadline_seconds = 300.0\n"), std::string::npos);
}

// The ack deadline is written only when it is not the default: the run name of a file without a
// `run` key derives from its text, and files written before the key existed keep theirs.
TEST(TopologyIo, AckDeadlineIsWrittenOnlyWhenSet) {
  Topology t = test::parse(test::federation("linear") + test::nodes(1));
  EXPECT_EQ(t.federation.ack_deadline_seconds, kDefaultAckDeadlineSeconds);
  EXPECT_EQ(to_toml(t).find("ack_deadline_seconds"), std::string::npos);
  t.federation.ack_deadline_seconds = 12.5;
  const std::string printed = to_toml(t);
  EXPECT_NE(printed.find("ack_deadline_seconds = 12.5\n"), std::string::npos) << printed;
  EXPECT_EQ(test::parse(printed).federation.ack_deadline_seconds, 12.5);
  EXPECT_ERROR(test::federation("linear", "ack_deadline_seconds = 0") + test::nodes(1),
               "t.toml:4: [federation] ack_deadline_seconds must be in (0, 604800], got 0");
  EXPECT_ERROR(test::federation("linear", "ack_deadline_seconds = \"60\"") + test::nodes(1),
               "'ack_deadline_seconds' must be a number, got a string");
}

// Keys added after files were written: left out when at their default (the default run name
// hashes the file's text), kept when set, checked when loaded.
TEST(TopologyIo, SilenceAndReceiveWindowAreWrittenOnlyWhenSet) {
  Topology t = test::parse(test::federation("linear") + test::nodes(1));
  EXPECT_EQ(t.federation.silence_seconds, kDefaultSilenceSeconds);
  EXPECT_EQ(t.federation.receive_window, kDefaultReceiveWindow);
  const std::string defaults = to_toml(t);
  EXPECT_EQ(defaults.find("silence_seconds"), std::string::npos);
  EXPECT_EQ(defaults.find("receive_window"), std::string::npos);
  t.federation.silence_seconds = 120;
  t.federation.receive_window = 0;
  const Topology again = test::parse(to_toml(t));
  EXPECT_EQ(again.federation.silence_seconds, 120);
  EXPECT_EQ(again.federation.receive_window, 0);
  // TCP keepalive counts whole seconds.
  EXPECT_ERROR(test::federation("linear", "silence_seconds = 0.5") + test::nodes(1),
               "t.toml:4: [federation] silence_seconds must be in [1, 604800], got 0.5");
  EXPECT_ERROR(test::federation("linear", "receive_window = 1.5") + test::nodes(1), "receive_window");
  t.federation.receive_window = -1;
  EXPECT_THROW(validate_topology(t), InputError);
}

TEST(TopologyIo, OptionTextsSurviveRoundTripsExactly) {
  Topology t = test::parse(test::federation("linear") + test::nodes(1));
  const std::vector<std::string> values = {"0",     "-3",   "007",   "-0",    "1e-6",   "1e-06", "0.1",  "3.0",
                                           "inf",   "nan",  "true",  "True",  "",       "a b",   "q\"uote", "back\\slash",
                                           "tab\t", "1.5e+300", "12345678901234567890123"};
  for (size_t i = 0; i < values.size(); ++i) t.federation.options["k" + std::to_string(i)] = values[i];
  t.federation.options["needs quoting key"] = "x";  // rejected by validation, but printable
  const std::string printed = to_toml(t);
  t.federation.options.erase("needs quoting key");
  const std::string printed_valid = to_toml(t);
  const Topology back = test::parse(printed_valid);
  EXPECT_EQ(back.federation.options, t.federation.options) << printed_valid;
  EXPECT_NE(printed.find("\"needs quoting key\" = \"x\""), std::string::npos) << printed;
  EXPECT_NE(error_of(printed).find("option name 'needs quoting key'"), std::string::npos);
}

TEST(TopologyIo, FloatOptionsKeepTheirShortestText) {
  const Topology t = test::parse(test::federation("linear", "[federation.options]\na = 0.1\nb = 3.0\nc = 2.5e-7\n") +
                                 test::nodes(1));
  EXPECT_EQ(t.federation.options.at("a"), "0.1");
  EXPECT_EQ(t.federation.options.at("b"), "3");
  EXPECT_EQ(t.federation.options.at("c"), "2.5e-07");
}

TEST(TopologyIo, SyntaxErrorsNameLineAndColumn) {
  const std::string m = error_of("[federation]\nmode = \"linear\"\nmethod = fedcgs\n");
  EXPECT_NE(m.find("t.toml:3:"), std::string::npos) << m;
  EXPECT_NE(m.find("not valid TOML"), std::string::npos) << m;
}

// Inputs that trip toml++ 3.3's internal assertions (marzer/tomlplusplus#301) are plain errors.
TEST(TopologyIo, HeadersThatUpsetTheTomlLibraryAreErrors) {
  for (const char* text : {"[[[1]]]", "[[[a]]]", "[[[]]", "[[=", "[federation]\n[[[node]]]\n"}) {
    const std::string m = error_of(text);
    EXPECT_NE(m.find("not valid TOML"), std::string::npos) << text << ": " << m;
  }
}

// toml++ 3.3 asks whether a non-ASCII character is whitespace through a table that reaches
// __builtin_unreachable for most of U+00A1..U+0499 (found by fuzz/fuzz_topology under UBSan;
// the inputs are in fuzz/regressions/topology/). Such characters outside strings and comments are
// refused before the parser sees them; inside strings and comments they stay welcome.
TEST(TopologyIo, NonAsciiOnlyInStringsAndComments) {
  for (const char* text : {"k\xcb\x9ete]", "k = 888\"88(88\xc8\xbf" "88\n", "c =+0''='\xc9\x81'\n", "t=9--c-- 4+:\"16\"=\"m\xe5\x9e\xa4\"\n", "[federation]\nmode = \"linear\" \xc3\xa9\n",
                           "k = \"\"\"a \\\n   \xc3\xa9\"\"\"\n", "k = \"\"\"\\\xc3\xa9\"\"\"\n"}) {
    const std::string m = error_of(text);
    EXPECT_NE(m.find("t.toml:"), std::string::npos) << m;
    EXPECT_NE(m.find("non-ASCII"), std::string::npos) << m;
  }
  for (const char* text : {"# \xc3\xa9toile \xe3\x80\x80\nk = 1 # n\xc5\x93ud\n", "k = \"caf\xc3\xa9\"\n", "k = 'caf\xc3\xa9'\n",
                           "k = '''\xcb\x9e\n\xc3\xa9'''\n", "k = \"\"\"\xc3\xa9\"\"\"\"\n", "k = [\"\xc3\xa9\", '\xc3\xa9']\n",
                           "\"cl\xc3\xa9\" = 1\n", "t = {a = \"\xc3\xa9\"}\n"})
    EXPECT_NO_THROW(topo::check_toml_text(text, "t.toml")) << text;
  std::string text = kFull;
  text.replace(text.find("# a complete star"), 17, "# \xc3\xa9toile compl\xc3\xa8te");
  EXPECT_EQ(error_of(text), "");
}

TEST(TopologyIo, StructureAndTypeErrors) {
  EXPECT_ERROR(test::nodes(1), "missing the [federation] table");
  EXPECT_ERROR("federation = 3\n" + test::nodes(1), "'federation' must be a table, got an integer");
  EXPECT_ERROR("nodes = 3\n" + test::federation("linear") + test::nodes(1), "t.toml:1: unknown key 'nodes' in the file");
  // After a table header a key belongs to that table (TOML), and is reported there.
  EXPECT_ERROR(test::federation("linear") + "nodes = 3\n" + test::nodes(1), "t.toml:5: unknown key 'nodes' in [federation]");
  EXPECT_ERROR("[federation]\nmethod = \"fedcgs\"\n" + test::nodes(1), "[federation] needs mode =");
  EXPECT_ERROR("[federation]\nmode = \"linear\"\n" + test::nodes(1), "[federation] needs method =");
  EXPECT_ERROR(test::federation("mesh") + test::nodes(1),
               "t.toml:2: [federation]: unknown topology mode 'mesh' (expected linear, ring, star or graph)");
  EXPECT_ERROR(test::federation("linear", "seed = -1") + test::nodes(1), "'seed' must be in [0, ");
  EXPECT_ERROR(test::federation("linear", "seed = 1.5") + test::nodes(1), "'seed' must be an integer, got a float");
  EXPECT_ERROR(test::federation("linear", "deadline_seconds = \"10\"") + test::nodes(1),
               "'deadline_seconds' must be a number, got a string");
  EXPECT_ERROR(test::federation("linear", "deadline_seconds = inf") + test::nodes(1), "'deadline_seconds' must be finite");
  EXPECT_ERROR(test::federation("linear") + test::node(0, "name = \"\""), "t.toml:9: node 0: name is empty");
  EXPECT_ERROR(test::federation("linear") + test::node(0, "state_dir = \"\""), "t.toml:9: node 0: state_dir is empty");
  // A value out of range points at its own line, not at the table's.
  EXPECT_ERROR(test::federation("linear", "seed = 1\ndeadline_seconds = 0") + test::nodes(1),
               "t.toml:5: [federation] deadline_seconds must be in (0, ");
  EXPECT_ERROR(test::federation("linear") + test::node(0, "name = \"n\"\nbind = \"tcp://h\""), "t.toml:10: node 0 (n): bind");
  EXPECT_ERROR(test::federation("linear", "colour = 1") + test::nodes(1), "unknown key 'colour' in [federation]");
  EXPECT_ERROR(test::federation("linear", "options = 3") + test::nodes(1), "'options' must be a table, got an integer");
  EXPECT_ERROR(test::federation("linear", "[federation.options]\nlayers = [1, 2]") + test::nodes(1),
               "'layers' must be a string, number or boolean, got an array");
  EXPECT_ERROR(test::federation("linear", "[federation.options]\nx = nan") + test::nodes(1), "'x' must be finite");
  EXPECT_ERROR("node = 1\n" + test::federation("linear"), "t.toml:1: 'node' must be an array of tables");
  EXPECT_ERROR(test::federation("linear") + "[[node]]\naddress = \"tcp://h:1\"\n", "t.toml:5: [[node]] needs id =");
  EXPECT_ERROR(test::federation("linear") + "[[node]]\nid = \"a\"\n", "'id' must be an integer, got a string");
  EXPECT_ERROR(test::federation("linear") + "[[node]]\nid = 4294967296\n", "'id' must be in [0, 4294967295]");
  EXPECT_ERROR(test::federation("linear", "discovery_port = 0") + test::nodes(1), "'discovery_port' must be in [1, 65535]");
  EXPECT_ERROR(test::federation("linear") + test::node(0, "adress = \"x\""), "t.toml:9: unknown key 'adress' in [[node]]");
  EXPECT_ERROR(test::federation("linear") + test::node(0, "name = 5"), "node 0: 'name' must be a string, got an integer");
  EXPECT_ERROR(test::federation("linear") + test::node(0, "partition_index = -2"), "'partition_index' must be in [0, ");
  EXPECT_ERROR("edge = 3\n" + test::federation("linear") + test::nodes(2), "'edge' must be an array of tables");
  EXPECT_ERROR(test::federation("linear") + test::nodes(2) + "[[edge]]\nfrom = 0\n", "[[edge]] needs both from = <node> and to = <node>");
  EXPECT_ERROR(test::federation("linear") + test::nodes(2) + "[[edge]]\nfrom = 0\nto = 1.0\n",
               "'to' must be a node id (integer) or a node name (string), got a float");
  EXPECT_ERROR(test::federation("linear") + test::nodes(2) + "[[edge]]\nfrom = 0\nto = -1\n", "'to' = -1 is not a node id");
  EXPECT_ERROR(test::federation("linear") + test::nodes(2) + "[[edge]]\nfrom = 0\nto = \"zero\"\n",
               "[[edge]] to: no node is named 'zero'");
  EXPECT_ERROR(test::federation("linear") + test::nodes(2) + "[[edge]]\nfrom = 0\nto = 1\nweight = 2\n",
               "unknown key 'weight' in [[edge]]");
  EXPECT_ERROR(test::federation("graph") + test::nodes(2) + "[[edge]]\nfrom = 0\nto = 1\nfeedback = 1\n",
               "'feedback' must be true or false, got an integer");
  EXPECT_ERROR(test::federation("star", "hub = \"centre\"") + test::nodes(2), "[federation] hub: no node is named 'centre'");
  EXPECT_ERROR(test::federation("linear") + test::node(0, "name = \"a\"") + test::node(1, "name = \"a\""),
               "node 1: the name 'a' is already used by node 0");
}

TEST(TopologyIo, RefusesOversizedText) {
  std::string text = test::federation("linear") + test::nodes(1);
  text += "# " + std::string(kMaxTopologyFileBytes, 'x') + "\n";
  EXPECT_ERROR(text, "a topology file is at most");
}

TEST(TopologyIo, LoadsFilesAndResolvesPathsAgainstTheirDirectory) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "conf/keys/n0");
  {
    std::ofstream(dir / "conf/keys/n0/node.pub") << key_hex(0) << "\n";
  }
  const std::string text = test::federation("linear") +
                           "[[node]]\nid = 0\naddress = \"tcp://127.0.0.1:7000\"\nkey_dir = \"keys/n0\"\n"
                           "state_dir = \"run/n0\"\n";
  { std::ofstream(dir / "conf/topo.toml") << text; }
  const Topology t = load_topology(dir / "conf/topo.toml");
  EXPECT_EQ(t.source, dir / "conf/topo.toml");
  EXPECT_EQ(t.key_dir_of(0), dir / "conf/keys/n0");
  EXPECT_EQ(t.state_dir_of(0), dir / "conf/run/n0");
  ASSERT_TRUE(t.node(0).public_key);
  EXPECT_EQ(public_key_hex(*t.node(0).public_key), key_hex(0));
  EXPECT_TRUE(t.node(0).public_key_text.empty());  // the file keeps naming the directory

  test::expect_input_error([&] { load_topology(dir / "conf/absent.toml"); }, {"no such topology file"});
}

// A node without an address is to be found by discovery (the node, not the file, checks that it
// runs with --discover): it loads, keeps no address when written back, and makes the hops CURVE.
TEST(TopologyIo, AddressIsOptionalForDiscovery) {
  test::TempDir dir;
  const std::string text = test::federation("linear", "discovery_port = 23000") + test::node(0) +
                           "[[node]]\nid = 1\npublic_key = \"" + key_hex(1) + "\"\n\n" + test::edges({{0, 1}});
  const Topology t = parse_topology(text, "t.toml", dir.str());
  EXPECT_EQ(t.node(1).address, "");
  EXPECT_EQ(t.federation.discovery_port, 23000);
  EXPECT_TRUE(t.beyond_loopback());
  EXPECT_EQ(t.hop_encryption(), HopEncryption::Curve);
  const std::string written = to_toml(t);
  EXPECT_NE(written.find("discovery_port = 23000"), std::string::npos) << written;
  const Topology again = parse_topology(written, "t.toml", dir.str());
  EXPECT_EQ(again.node(1).address, "");
  EXPECT_EQ(again.node(0).address, "tcp://127.0.0.1:7000");
  // With every address on loopback and the default port, nothing new is written (run names stay).
  const std::string plain = to_toml(parse_topology(test::federation("linear") + test::nodes(2) + test::edges({{0, 1}}), "t.toml", dir.str()));
  EXPECT_EQ(plain.find("discovery_port"), std::string::npos) << plain;
}

TEST(TopologyIo, KeyDirectoryRules) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "k0");
  const std::string base = test::federation("linear") + "[[node]]\nid = 0\naddress = \"tcp://127.0.0.1:7000\"\nkey_dir = \"k0\"\n";
  auto error_in = [&](const std::string& text) {
    try {
      parse_topology(text, "t.toml", dir.str());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // No node.pub yet and no inline key: the message says how to make one.
  std::string m = error_in(base);
  EXPECT_NE(m.find("t.toml:5: node 0 has no public key"), std::string::npos) << m;
  EXPECT_NE(m.find("fednode keygen --out DIR"), std::string::npos) << m;
  // Allowed when keys are not required (inspecting a file before keys exist).
  LoadOptions keyless;
  keyless.require_keys = false;
  EXPECT_FALSE(parse_topology(base, "t.toml", dir.str(), keyless).node(0).public_key);
  // The directory lives on another machine: the inline key is enough.
  EXPECT_EQ(error_in(base + "public_key = \"" + key_hex(0) + "\"\n"), "");
  // Both present and different: refused.
  { std::ofstream(dir / "k0/node.pub") << key_hex(5); }
  m = error_in(base + "public_key = \"" + key_hex(0) + "\"\n");
  EXPECT_NE(m.find("public_key differs from the key in"), std::string::npos) << m;
  // A key file that is not a key.
  { std::ofstream(dir / "k0/node.pub") << "hello"; }
  m = error_in(base);
  EXPECT_NE(m.find("k0/node.pub does not hold a public key"), std::string::npos) << m;
  { std::ofstream(dir / "k0/node.pub") << std::string(2000, 'a'); }
  m = error_in(base);
  EXPECT_NE(m.find("too large for a public key file"), std::string::npos) << m;
  // A custom reader (the crypto layer's) replaces the file lookup.
  LoadOptions custom;
  custom.read_public_key = [](const std::string& d) -> std::optional<std::string> {
    return d.find("k0") != std::string::npos ? std::optional<std::string>(key_hex(9)) : std::nullopt;
  };
  const Topology t = parse_topology(base, "t.toml", dir.str(), custom);
  EXPECT_EQ(public_key_hex(*t.node(0).public_key), key_hex(9));
}

TEST(TopologyIo, SaveRefusesKeylessUnlessAsked) {
  test::TempDir dir;
  LoadOptions keyless;
  keyless.require_keys = false;
  Topology t = parse_topology(test::federation("linear") +
                                  "[[node]]\nid = 0\naddress = \"tcp://127.0.0.1:7000\"\nkey_dir = \"nowhere\"\n",
                              "t.toml", dir.str(), keyless);
  test::expect_input_error([&] { save_topology(t, dir / "out.toml"); }, {"node 0 has no public key"});
  EXPECT_FALSE(std::filesystem::exists(dir / "out.toml"));
  save_topology(t, dir / "out.toml", true);
  EXPECT_NO_THROW(load_topology(dir / "out.toml", keyless));
  EXPECT_THROW(load_topology(dir / "out.toml"), InputError);

  t.nodes[0].public_key_text = key_hex(3);
  t.nodes[0].public_key = decode_public_key(key_hex(3));
  save_topology(t, dir / "out.toml");
  const Topology back = load_topology(dir / "out.toml");
  EXPECT_EQ(public_key_hex(*back.node(0).public_key), key_hex(3));
  std::ostringstream printed;
  print_topology(back, printed);
  EXPECT_EQ(printed.str(), to_toml(t));
}

// Damaged files give an InputError, never another exception or a crash.
TEST(TopologyIo, MutatedFilesFailCleanly) {
  Rng rng(77);
  const std::string alphabet = "[]{}=\"'.,#\n 0123456789abcxyz-_:/*tcp";
  int rejected = 0;
  for (int round = 0; round < 1500; ++round) {
    std::string text = kFull;
    const int edits = 1 + static_cast<int>(rng.below(4));
    for (int k = 0; k < edits; ++k) {
      const size_t at = rng.below(text.size());
      switch (rng.below(3)) {
        case 0: text[at] = alphabet[rng.below(alphabet.size())]; break;
        case 1: text.erase(at, 1 + rng.below(8)); break;
        default: text.insert(at, 1, alphabet[rng.below(alphabet.size())]); break;
      }
    }
    try {
      test::parse(text);
    } catch (const InputError&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "round " << round << ": " << typeid(e).name() << ": " << e.what() << "\n" << text;
    }
  }
  EXPECT_GT(rejected, 500);
}

TEST(PublicKeyText, HexAndBase64) {
  PublicKeyBytes k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::string hex = public_key_hex(k);
  EXPECT_EQ(hex.size(), 64u);
  EXPECT_EQ(decode_public_key(hex), k);
  std::string upper = hex;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(decode_public_key("  " + upper + "\n"), k);
  // base64 of the same bytes, computed independently: 0x01 0x08 0x0f ... (i*7+1).
  const std::string b64 = "AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09o=";
  EXPECT_EQ(decode_public_key(b64), k);
  EXPECT_EQ(decode_public_key(b64.substr(0, 43)), k);  // padding optional
  std::string why;
  EXPECT_FALSE(decode_public_key(hex.substr(0, 62), &why));
  EXPECT_EQ(why, "expected 64 hex digits (32 bytes), got 62");
  EXPECT_FALSE(decode_public_key("g" + hex.substr(1), &why));
  EXPECT_EQ(why, "character 1 is not a hex digit");
  EXPECT_FALSE(decode_public_key(b64.substr(0, 40), &why));
  EXPECT_NE(why.find("got 40 characters"), std::string::npos) << why;
  EXPECT_FALSE(decode_public_key("AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09!", &why));
  EXPECT_EQ(why, "character 43 is neither hex nor base64");
  EXPECT_FALSE(decode_public_key("AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09r", &why));  // stray low bits
  EXPECT_NE(why.find("stray bits"), std::string::npos) << why;
  EXPECT_FALSE(decode_public_key("   ", &why));
  EXPECT_EQ(why, "the key is empty");
  // 43 base64 digits that happen to all be hex digits are still base64.
  EXPECT_TRUE(decode_public_key(std::string(42, 'a') + "A"));
}

}  // namespace
}  // namespace fednode
