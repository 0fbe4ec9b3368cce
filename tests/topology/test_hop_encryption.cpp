// [federation] hop_encryption: read, refused when misspelt, auto resolved by the addresses,
// written back only when set (so the default run name of an existing file does not change), and
// carried by the builders.
#include "helpers.h"

#include "topology/builders.h"

namespace fednode {
namespace {

using test::error_of;

TEST(HopEncryption, DefaultsToAutoAndIsNotWritten) {
  const Topology t = test::parse(test::federation("linear") + test::nodes(2) + test::edges({{0, 1}}));
  EXPECT_EQ(t.federation.hop_encryption, HopEncryption::Auto);
  EXPECT_EQ(to_toml(t).find("hop_encryption"), std::string::npos) << to_toml(t);
  const Topology explicit_auto = test::parse(test::federation("linear", "hop_encryption = \"auto\"") +
                                             test::nodes(2) + test::edges({{0, 1}}));
  EXPECT_EQ(explicit_auto.federation.hop_encryption, HopEncryption::Auto);
  // Writing "auto" or leaving it out is one federation: one default run name.
  EXPECT_EQ(run_name(explicit_auto), run_name(t));
  const Topology explicit_none = test::parse(test::federation("linear", "hop_encryption = \"none\"") +
                                             test::nodes(2) + test::edges({{0, 1}}));
  EXPECT_NE(to_toml(explicit_none).find("hop_encryption = \"none\"\n"), std::string::npos);
}

// Without a setting, CurveZMQ as soon as a node can be reached from beyond this machine: a
// stranger who reaches a plain port can make the node hold memory without bound.
TEST(HopEncryption, AutoIsCurveBeyondLoopback) {
  auto resolved = [](const std::string& extra_node, const std::string& setting = "") {
    return test::parse(test::federation("linear", setting) + test::node(0) + "[[node]]\nid = 1\n" + extra_node +
                       "\npublic_key = \"" + test::key_hex(1) + "\"\n\n" + test::edges({{0, 1}}))
        .hop_encryption();
  };
  EXPECT_EQ(resolved("address = \"tcp://127.0.0.1:7001\""), HopEncryption::None);
  EXPECT_EQ(resolved("address = \"tcp://127.5.3.9:7001\""), HopEncryption::None);
  EXPECT_EQ(resolved("address = \"tcp://localhost:7001\""), HopEncryption::None);
  EXPECT_EQ(resolved("address = \"tcp://[::1]:7001\""), HopEncryption::None);
  EXPECT_EQ(resolved("address = \"tcp://10.0.0.2:7001\""), HopEncryption::Curve);
  EXPECT_EQ(resolved("address = \"tcp://edge-7.lan:7001\""), HopEncryption::Curve);
  EXPECT_EQ(resolved("address = \"tcp://127.0.0.1:7001\"\nbind = \"tcp://*:7001\""), HopEncryption::Curve);
  EXPECT_EQ(resolved("address = \"tcp://10.0.0.2:7001\"", "hop_encryption = \"none\""), HopEncryption::None);
  EXPECT_EQ(resolved("address = \"tcp://127.0.0.1:7001\"", "hop_encryption = \"curve\""), HopEncryption::Curve);
}

TEST(HopEncryption, CurveRoundTripsThroughTheFile) {
  const Topology a = test::parse(test::federation("ring", "hop_encryption = \"curve\"") + test::nodes(3) +
                                 test::edges({{0, 1}, {1, 2}, {2, 0}}));
  EXPECT_EQ(a.federation.hop_encryption, HopEncryption::Curve);
  const std::string printed = to_toml(a);
  EXPECT_NE(printed.find("hop_encryption = \"curve\"\n"), std::string::npos) << printed;
  const Topology b = test::parse(printed);
  EXPECT_EQ(b.federation.hop_encryption, HopEncryption::Curve);
  EXPECT_EQ(to_toml(b), printed);
  // Turning it on is a different federation, so the default run name changes with it.
  Topology plain = a;
  plain.federation.hop_encryption = HopEncryption::None;
  EXPECT_NE(run_name(plain), run_name(a));
}

TEST(HopEncryption, BadValuesAreRefusedWithTheirLine) {
  const std::string misspelt = test::federation("linear", "hop_encryption = \"CurveZMQ\"") + test::nodes(1);
  const std::string message = error_of(misspelt);
  EXPECT_NE(message.find("t.toml:4"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown hop encryption 'CurveZMQ' (expected none, curve or auto)"), std::string::npos)
      << message;
  EXPECT_NE(error_of(test::federation("linear", "hop_encryption = true") + test::nodes(1))
                .find("'hop_encryption' must be a string, got a boolean"),
            std::string::npos);
  // A key one letter off is an unknown key, not silently plain TCP.
  EXPECT_NE(error_of(test::federation("linear", "hop_encription = \"curve\"") + test::nodes(1))
                .find("unknown key 'hop_encription' in [federation]"),
            std::string::npos);
  EXPECT_EQ(parse_hop_encryption("curve"), HopEncryption::Curve);
  EXPECT_STREQ(to_string(HopEncryption::None), "none");
  EXPECT_THROW(parse_hop_encryption(""), InputError);
}

TEST(HopEncryption, ValidationRefusesAValueOutsideTheEnum) {
  Topology t = test::parse(test::federation("linear") + test::nodes(1));
  t.federation.hop_encryption = static_cast<HopEncryption>(7);
  test::expect_input_error([&] { validate_topology(t); }, {"hop_encryption must be \"none\", \"curve\" or \"auto\""});
}

TEST(HopEncryption, BuildersCarryTheSetting) {
  TopologyBuildOptions o;
  o.mode = TopologyMode::Star;
  o.nodes = 3;
  o.public_key = keys_from_map({{0, test::key_hex(0)}, {1, test::key_hex(1)}, {2, test::key_hex(2)}});
  EXPECT_EQ(build_topology(o).federation.hop_encryption, HopEncryption::Auto);
  o.hop_encryption = HopEncryption::Curve;
  const Topology t = build_topology(o);
  EXPECT_EQ(t.federation.hop_encryption, HopEncryption::Curve);
  EXPECT_EQ(test::parse(to_toml(t)).federation.hop_encryption, HopEncryption::Curve);
}

}  // namespace
}  // namespace fednode
