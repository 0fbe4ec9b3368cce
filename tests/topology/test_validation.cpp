// Every validation rule of docs/topologies.md, each with the message it must give.
#include "helpers.h"

namespace fednode {
namespace {

using test::edges;
using test::federation;
using test::key_hex;
using test::node;
using test::nodes;

std::string with_address(NodeId id, const std::string& address) {
  return "[[node]]\nid = " + std::to_string(id) + "\naddress = \"" + address + "\"\npublic_key = \"" + key_hex(id) + "\"\n\n";
}

TEST(TopologyValidation, AcceptsOneWellFormedFilePerMode) {
  EXPECT_NO_THROW(test::parse(federation("linear") + nodes(3) + edges({{0, 1}, {1, 2}})));
  EXPECT_NO_THROW(test::parse(federation("linear") + nodes(1)));
  EXPECT_NO_THROW(test::parse(federation("ring") + nodes(3) + edges({{0, 1}, {1, 2}, {2, 0}})));
  EXPECT_NO_THROW(test::parse(federation("star", "hub = 1") + nodes(3) + edges({{0, 1}, {2, 1}})));
  EXPECT_NO_THROW(test::parse(federation("graph") + nodes(4) + edges({{0, 1}, {0, 2}, {1, 3}, {2, 3}})));
  EXPECT_NO_THROW(test::parse(federation("graph") + nodes(1)));
}

TEST(TopologyValidation, FederationSettings) {
  EXPECT_ERROR(federation("linear"), "t.toml: the topology lists no nodes");
  EXPECT_ERROR("[federation]\nmode = \"linear\"\nmethod = \"\"\n" + nodes(1), "t.toml:3: [federation] method is empty");
  EXPECT_ERROR("[federation]\nmode = \"linear\"\nmethod = \"fed cgs\"\n" + nodes(1), "method 'fed cgs' is not a method name");
  EXPECT_ERROR(federation("linear", "deadline_seconds = 0") + nodes(1), "deadline_seconds must be in (0, 604800], got 0");
  EXPECT_ERROR(federation("linear", "deadline_seconds = 1e9") + nodes(1), "deadline_seconds must be in (0, 604800]");
  EXPECT_ERROR(federation("linear", "hub = 0") + nodes(1), "hub is only meaningful in star mode (this is linear)");
  EXPECT_ERROR(federation("graph", "start = 0") + nodes(1), "start is only meaningful in ring mode (this is graph)");
  EXPECT_ERROR(federation("star", "hub = 9") + nodes(2) + edges({{1, 0}}), "[federation] hub = 9: no node has that id");
  EXPECT_ERROR(federation("ring", "start = 9") + nodes(2) + edges({{1, 0}, {0, 1}}), "[federation] start = 9: no node has that id");
  EXPECT_ERROR(federation("linear", "[federation.options]\nmethod = \"fedpft\"") + nodes(1),
               "[federation.options]: 'method' is set once for the whole federation");
  EXPECT_ERROR(federation("linear", "[federation.data]\n\"-x\" = 1") + nodes(1),
               "[federation.data]: option name '-x' must be letters, digits");
  EXPECT_ERROR(federation("linear") + node(0, "[node.options]\n\"a.b\" = 1"), "node 0 options: option name 'a.b'");
  EXPECT_ERROR(federation("linear", "[federation.options]\nx = \"" + std::string(5000, 'v') + "\"") + nodes(1),
               "option 'x' is longer than 4096 characters");

  Topology t = test::parse(federation("linear") + nodes(1));
  t.federation.seed = ~uint64_t{0};
  test::expect_input_error([&] { validate_topology(t); }, {"seed must be at most 2^63 - 1"});
}

TEST(TopologyValidation, TooManyNodes) {
  Topology t = test::parse(federation("linear") + nodes(1));
  t.nodes.resize(kMaxTopologyNodes + 1, t.nodes[0]);
  test::expect_input_error([&] { validate_topology(t); }, {"at most 16384 nodes, the topology has 16385"});
  Topology g = test::parse(federation("graph") + nodes(1));
  g.nodes.resize(kMaxGraphNodes + 1, g.nodes[0]);
  test::expect_input_error([&] { validate_topology(g); }, {"graph mode: at most 1024 nodes, the topology has 1025"});
}

TEST(TopologyValidation, Ids) {
  EXPECT_ERROR(federation("linear") + node(3) + node(3), "t.toml:10: duplicate node id 3 (also at t.toml:5)");
  EXPECT_ERROR(federation("linear") + node(0, "name = \"12\""), "node 0 (12): name '12' must be 1 to 32 letters");
  EXPECT_ERROR(federation("linear") + node(0, "name = \"a b\""), "name 'a b' must be 1 to 32 letters");
  EXPECT_ERROR(federation("linear") + node(0, "name = \"" + std::string(33, 'x') + "\""), "must be 1 to 32 letters");
}

TEST(TopologyValidation, Addresses) {
  const std::string f = federation("linear");
  EXPECT_ERROR(f + with_address(0, "udp://1.2.3.4:5"), "t.toml:7: node 0: address 'udp://1.2.3.4:5' must start with tcp://");
  EXPECT_ERROR(f + with_address(0, "tcp://1.2.3.4"), "address 'tcp://1.2.3.4' has no port");
  EXPECT_ERROR(f + with_address(0, "tcp://1.2.3.4:0"), "has port '0'; a port is a number from 1 to 65535");
  EXPECT_ERROR(f + with_address(0, "tcp://1.2.3.4:65536"), "has port '65536'");
  EXPECT_ERROR(f + with_address(0, "tcp://1.2.3.4:"), "has port ''");
  EXPECT_ERROR(f + with_address(0, "tcp://1.2.3.4:80x"), "has port '80x'");
  EXPECT_ERROR(f + with_address(0, "tcp://:7000"), "the host is empty");
  EXPECT_ERROR(f + with_address(0, "tcp://300.1.1.1:7000"), "'300.1.1.1' is not a valid IPv4 address");
  EXPECT_ERROR(f + with_address(0, "tcp://1.2.3:7000"), "'1.2.3' is not a valid IPv4 address");
  EXPECT_ERROR(f + with_address(0, "tcp://ho_st:7000"), "the host contains '_'");
  EXPECT_ERROR(f + with_address(0, "tcp://-host:7000"), "'-host' is not a valid host name");
  EXPECT_ERROR(f + with_address(0, "tcp://*:7000"), "uses host '*', which is only for bind");
  EXPECT_ERROR(f + with_address(0, "tcp://::1:7000"), "has an IPv6 host without brackets");
  EXPECT_ERROR(f + with_address(0, "tcp://[::1:7000"), "opens '[' for an IPv6 address without closing it");
  EXPECT_ERROR(f + with_address(0, "tcp://[]:7000"), "the IPv6 address in brackets is empty");
  EXPECT_ERROR(f + with_address(0, "tcp://[fe80::g]:7000"), "the IPv6 address contains 'g'");
  EXPECT_NO_THROW(test::parse(f + with_address(0, "tcp://[fe80::1]:7000")));
  EXPECT_NO_THROW(test::parse(f + with_address(0, "tcp://node-0.example.org:7000")));
  EXPECT_ERROR(f + node(0, "bind = \"tcp://*\""), "node 0: bind 'tcp://*' has no port");
  EXPECT_NO_THROW(test::parse(f + node(0, "bind = \"tcp://*:7000\"")));
  EXPECT_NO_THROW(test::parse(f + node(0, "bind = \"tcp://0.0.0.0:7000\"")));
}

TEST(TopologyValidation, DuplicateAddressesComparedByHostAndPort) {
  const std::string f = federation("linear");
  EXPECT_ERROR(f + with_address(0, "tcp://LocalHost:7000") + with_address(1, "tcp://localhost:07000") + edges({{0, 1}}),
               "t.toml:12: node 1: address 'tcp://localhost:07000' is already the address of node 0 (line 5)");
  // Same port on different hosts is fine (a LAN), as is the same host on different ports.
  EXPECT_NO_THROW(test::parse(f + with_address(0, "tcp://10.0.0.1:7000") + with_address(1, "tcp://10.0.0.2:7000") +
                              edges({{0, 1}})));
}

TEST(TopologyValidation, PublicKeys) {
  const std::string f = federation("linear");
  const std::string a = "[[node]]\nid = 0\naddress = \"tcp://127.0.0.1:7000\"\n";
  EXPECT_ERROR(f + a + "public_key = \"" + key_hex(0).substr(2) + "\"\n",
               "t.toml:5: node 0: public_key is malformed: expected 64 hex digits (32 bytes), got 62");
  EXPECT_ERROR(f + a + "public_key = \"" + key_hex(0) + "00\"\n", "got 66");
  EXPECT_ERROR(f + a + "public_key = \"not a key at all\"\n", "public_key is malformed");
  EXPECT_ERROR(f + a, "t.toml:5: node 0 has no public key: give public_key =");
  EXPECT_ERROR(f + node(0) + node(1, "").replace(node(1, "").find(key_hex(1)), 64, key_hex(0)) + edges({{0, 1}}),
               "node 1 has the same public key as node 0: every node needs its own identity");
}

TEST(TopologyValidation, StateDirectoriesAndPartitions) {
  const std::string f = federation("linear");
  EXPECT_ERROR(f + node(0, "state_dir = \"s/a\"") + node(1, "state_dir = \"s/./a\"") + edges({{0, 1}}),
               "node 1: state directory 's/a' is also used by node 0");
  // The default state/n<id> counts too.
  EXPECT_ERROR(f + node(0) + node(1, "state_dir = \"state/n0\"") + edges({{0, 1}}), "is also used by node 0");
  EXPECT_ERROR(f + node(0, "partition_index = 2") + node(1) + edges({{0, 1}}),
               "node 0: partition_index 2 is out of range: the 2 nodes hold parts 0 to 1");
  EXPECT_ERROR(f + node(0, "partition_index = 1") + node(1, "partition_index = 1") + edges({{0, 1}}),
               "node 1: partition_index 1 is also held by node 0");
  EXPECT_ERROR(f + node(0, "partition_index = 1") + node(1) + edges({{0, 1}}),
               "node 1 would hold part 1 of the partition, as does node 0; give every node an explicit, distinct partition_index");
  EXPECT_NO_THROW(test::parse(f + node(0, "partition_index = 1") + node(1, "partition_index = 0") + edges({{0, 1}})));
}

TEST(TopologyValidation, Edges) {
  const std::string f = federation("linear");
  EXPECT_ERROR(f + nodes(2) + edges({{0, 5}}), "t.toml:15: edge 0 -> 5: no node has id 5");
  EXPECT_ERROR(f + nodes(2) + edges({{5, 0}}), "edge 5 -> 0: no node has id 5");
  EXPECT_ERROR(f + nodes(2) + edges({{1, 1}}), "edge 1 -> 1 is a self-loop");
  EXPECT_ERROR(f + nodes(2) + edges({{0, 1}, {0, 1}}), "t.toml:19: edge 0 -> 1 is listed twice (also at t.toml:15)");
  EXPECT_ERROR(f + nodes(2) + "[[edge]]\nfrom = 0\nto = 1\nfeedback = true\n", "edge 0 -> 1: feedback edges exist only in graph mode");
}

TEST(TopologyValidation, LinearIsOneSimplePath) {
  const std::string f = federation("linear");
  EXPECT_ERROR(f + nodes(3) + edges({{0, 1}, {0, 2}}),
               "linear mode: node 0 has 2 outgoing edges (to 1, 2); a chain sends to exactly one next node");
  EXPECT_ERROR(f + nodes(3) + edges({{0, 2}, {1, 2}}),
               "linear mode: node 2 has 2 incoming edges (from 0, 1); a chain receives from exactly one node");
  EXPECT_ERROR(f + nodes(3) + edges({{0, 1}, {1, 2}, {2, 0}}),
               "linear mode: the edges 0 -> 1 -> 2 -> 0 form a cycle (lines 20, 24, 28); a chain has a first and a last node");
  EXPECT_ERROR(f + nodes(4) + edges({{0, 1}, {2, 3}}),
               "linear mode: the edges make 2 separate chains, starting at nodes 0, 2; join them into one chain");
  EXPECT_ERROR(f + nodes(3) + edges({{0, 1}}), "2 separate chains, starting at nodes 0, 2");
}

TEST(TopologyValidation, RingIsOneCycle) {
  const std::string f = federation("ring");
  EXPECT_ERROR(f + nodes(1), "ring mode needs at least 2 nodes");
  EXPECT_ERROR(f + nodes(3) + edges({{0, 1}, {1, 2}}), "t.toml:5: ring mode: node 0 has no incoming edge");
  EXPECT_ERROR(f + nodes(3) + edges({{1, 2}, {2, 0}}), "t.toml:5: ring mode: node 0 has no outgoing edge");
  EXPECT_ERROR(f + nodes(3) + edges({{0, 1}, {1, 2}, {2, 1}}), "ring mode: node 1 has 2 incoming edges (from 0, 2)");
  EXPECT_ERROR(f + nodes(4) + edges({{0, 1}, {1, 0}, {2, 3}, {3, 2}}),
               "ring mode: the edges make 2 separate cycles (0 -> 1 -> 0 and 2 -> 3 -> 2); a ring is one cycle through every node");
}

TEST(TopologyValidation, StarIsLeavesToHub) {
  EXPECT_ERROR(federation("star") + nodes(2) + edges({{1, 0}}), "star mode needs hub = <node id> in [federation]");
  EXPECT_ERROR(federation("star", "hub = 0") + nodes(1), "star mode needs the hub and at least one leaf");
  EXPECT_ERROR(federation("star", "hub = 0") + nodes(3) + edges({{1, 0}, {0, 2}}),
               "star mode: edge 0 -> 2 leaves the hub; list only leaf -> hub edges");
  EXPECT_ERROR(federation("star", "hub = 0") + nodes(3) + edges({{1, 0}, {2, 1}}),
               "star mode: edge 2 -> 1 joins two leaves; in a star every edge goes from a leaf to the hub 0");
  EXPECT_ERROR(federation("star", "hub = 0") + nodes(3) + edges({{1, 0}}),
               "t.toml:15: star mode: leaf node 2 has no edge to the hub; add [[edge]] from = 2, to = 0");
}

TEST(TopologyValidation, GraphNeedsEveryNodeAbleToFinish) {
  const std::string f = federation("graph");
  EXPECT_ERROR(f + nodes(3) + edges({{0, 1}}), "graph mode: node 2 has no edges: it would neither send nor receive");
  EXPECT_ERROR(f + nodes(4) + edges({{0, 1}, {2, 3}}),
               "graph mode: the nodes form 2 groups with no edge between them (one holds 0, 1; another 2, 3)");
  // A cycle, and a node after it: all of them would wait forever.
  const std::string m =
      test::error_of(f + nodes(5) + edges({{0, 1}, {1, 2}, {2, 3}, {3, 1}, {3, 4}}));
  EXPECT_NE(m.find("graph mode: the edges 1 -> 2 -> 3 -> 1 form a cycle (lines 34, 38, 42)"), std::string::npos) << m;
  EXPECT_NE(m.find("so nodes 1, 2, 3, 4 could never finish"), std::string::npos) << m;
  EXPECT_NE(m.find("Mark one edge of the cycle feedback = true"), std::string::npos) << m;
  // Marking the way back as feedback makes it valid.
  EXPECT_NO_THROW(test::parse(f + nodes(5) + edges({{0, 1}, {1, 2}, {2, 3}, {3, 4}}) +
                              "[[edge]]\nfrom = 3\nto = 1\nfeedback = true\n"));
  EXPECT_ERROR(f + nodes(3) + edges({{0, 1}, {0, 2}}) + "[[edge]]\nfrom = 1\nto = 2\nfeedback = true\n",
               "graph mode: edge 1 -> 2 is marked feedback but 2 has no path to 1, so it closes no cycle");
}

}  // namespace
}  // namespace fednode
