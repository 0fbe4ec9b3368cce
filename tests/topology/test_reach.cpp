// Nodes that accept no connections and the relays that join them: what the file may say, what it
// may not, and how each node then reaches each neighbour (topology/reach.h).
#include "helpers.h"

#include "topology/reach.h"

namespace fednode {
namespace {

using test::edges;
using test::federation;
using test::key_hex;
using test::node;

// A node without address that accepts no connections.
std::string hidden(NodeId id, const std::string& extra = "") {
  return "[[node]]\nid = " + std::to_string(id) + "\nreachable = false\npublic_key = \"" + key_hex(id) + "\"\n" +
         extra + "\n";
}

std::string relay(const std::string& name, int port, uint64_t key = 500, const std::string& extra = "") {
  return "[[relay]]\nname = \"" + name + "\"\naddress = \"tcp://127.0.0.1:" + std::to_string(port) +
         "\"\npublic_key = \"" + key_hex(key) + "\"\n" + extra + "\n";
}

TEST(TopologyReach, EachNeighbourIsDialledAnsweredOrMetAtARelay) {
  const Topology t = test::parse(federation("linear") + hidden(0) + hidden(1) + node(2) + hidden(3) + node(4) +
                                 edges({{0, 1}, {1, 2}, {2, 3}, {3, 4}}) + relay("r1", 7100) + relay("r2", 7101, 501));
  EXPECT_FALSE(t.node(0).reachable);
  EXPECT_TRUE(t.node(2).reachable);
  const PeerReach dial = reach(t, 1, 2);
  EXPECT_EQ(dial.way, PeerReach::Way::Dial);
  EXPECT_EQ(dial.address, "tcp://127.0.0.1:7002");
  EXPECT_EQ(reach(t, 2, 1).way, PeerReach::Way::Answer);
  EXPECT_EQ(reach(t, 2, 3).way, PeerReach::Way::Answer);
  EXPECT_EQ(reach(t, 3, 2).way, PeerReach::Way::Dial);
  const PeerReach relayed = reach(t, 0, 1);
  ASSERT_EQ(relayed.way, PeerReach::Way::Relay);
  ASSERT_EQ(relayed.relays.size(), 2u);  // every relay of the file, in its order
  EXPECT_EQ(relayed.relays[0]->name, "r1");
  EXPECT_EQ(relayed.relays[1]->address, "tcp://127.0.0.1:7101");
}

TEST(TopologyReach, AGraphEdgeChoosesItsRelays) {
  const Topology t = test::parse(federation("graph") + hidden(0) + hidden(1) + node(2) + relay("r1", 7100) +
                                 relay("r2", 7101, 501) + "[[edge]]\nfrom = 0\nto = 1\nvia = [\"r2\", \"r1\"]\n\n" +
                                 edges({{1, 2}}));
  const PeerReach r = reach(t, 1, 0);
  ASSERT_EQ(r.relays.size(), 2u);
  EXPECT_EQ(r.relays[0]->name, "r2");
  EXPECT_EQ(t.edges[0].via, (std::vector<std::string>{"r2", "r1"}));
  // Written back and read again, the same.
  const Topology again = test::parse(to_toml(t));
  EXPECT_EQ(again.edges[0].via, t.edges[0].via);
  EXPECT_FALSE(again.node(1).reachable);
  ASSERT_EQ(again.relays.size(), 2u);
  EXPECT_EQ(again.relays[1].name, "r2");
  EXPECT_EQ(again.relays[1].public_key, t.relays[1].public_key);
}

TEST(TopologyReach, TwoHiddenNodesWithoutARelayAreNamed) {
  const Topology t = test::parse(federation("linear") + hidden(0) + hidden(1) + edges({{0, 1}}));
  test::expect_input_error([&] { reach(t, 0, 1); },
                           {"node 0 and node 1 both have reachable = false", "[[relay]]"});
}

TEST(TopologyReach, WhatAFileMayNotSay) {
  EXPECT_ERROR(federation("linear") + hidden(0, "address = \"tcp://127.0.0.1:7000\""),
               "node 0 has reachable = false, so it never listens: leave out its address");
  EXPECT_ERROR(federation("linear") + hidden(0, "bind = \"tcp://*:7000\""), "leave out its bind");
  EXPECT_ERROR(federation("linear") + node(0, "reachable = 0"), "'reachable' must be true or false");
  EXPECT_ERROR(federation("linear") + node(0) + "[[relay]]\naddress = \"tcp://127.0.0.1:7100\"\n",
               "[[relay]] needs name");
  EXPECT_ERROR(federation("linear") + node(0) + "[[relay]]\nname = \"r1\"\n", "relay 'r1' needs address");
  EXPECT_ERROR(federation("linear") + node(0) + relay("r1", 7100) + relay("r1", 7101, 501), "relay 'r1' is listed twice");
  EXPECT_ERROR(federation("linear") + node(0) + relay("12", 7100), "relay '12': a relay's name must be");
  EXPECT_ERROR(federation("linear") + node(0) + relay("r1", 7100) + relay("r2", 7100, 501),
               "relay 'r2': address 'tcp://127.0.0.1:7100' is also relay 'r1's");
  EXPECT_ERROR(federation("linear") + node(0) + relay("r1", 7100, 0), "relay 'r1' has the public key of a node");
  EXPECT_ERROR(federation("linear") + node(0) + "[[relay]]\nname = \"r1\"\naddress = \"tcp://127.0.0.1:7100\"\n",
               "relay 'r1' has no public key");
  EXPECT_ERROR(federation("linear") + node(0) + relay("r1", 7100, 500, "colour = 1"), "unknown key 'colour' in [[relay]]");
  EXPECT_ERROR(federation("graph") + hidden(0) + hidden(1) + "[[edge]]\nfrom = 0\nto = 1\nvia = \"r9\"\n",
               "edge 0 -> 1: via names relay 'r9', which no [[relay]] section lists");
  EXPECT_ERROR(federation("graph") + node(0) + node(1) + "[[edge]]\nfrom = 0\nto = 1\nvia = 3\n",
               "'via' must be a name or an array of names");
}

TEST(TopologyReach, HiddenNodesAndRelaysDecideHopEncryption) {
  // An unreachable node has no address by design: on loopback, that alone is not a network.
  EXPECT_EQ(test::parse(federation("linear") + node(0) + hidden(1) + edges({{0, 1}})).hop_encryption(),
            HopEncryption::None);
  EXPECT_EQ(test::parse(federation("linear") + node(0) + hidden(1) + edges({{0, 1}}) +
                        "[[relay]]\nname = \"r\"\naddress = \"tcp://192.0.2.1:7100\"\npublic_key = \"" + key_hex(500) +
                        "\"\n")
                .hop_encryption(),
            HopEncryption::Curve);
}

}  // namespace
}  // namespace fednode
