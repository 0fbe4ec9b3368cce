// [federation] hop_encryption: read, refused when misspelt, written back only when set (so the
// default run name of an existing file does not change), and carried by the builders.
#include "helpers.h"

#include "topology/builders.h"

namespace fednode {
namespace {

using test::error_of;

TEST(HopEncryption, DefaultsToNoneAndIsNotWritten) {
  const Topology t = test::parse(test::federation("linear") + test::nodes(2) + test::edges({{0, 1}}));
  EXPECT_EQ(t.federation.hop_encryption, HopEncryption::None);
  EXPECT_EQ(to_toml(t).find("hop_encryption"), std::string::npos) << to_toml(t);
  const Topology explicit_none = test::parse(test::federation("linear", "hop_encryption = \"none\"") +
                                             test::nodes(2) + test::edges({{0, 1}}));
  EXPECT_EQ(explicit_none.federation.hop_encryption, HopEncryption::None);
  // Writing "none" or leaving it out is one federation: one default run name.
  EXPECT_EQ(run_name(explicit_none), run_name(t));
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
  EXPECT_NE(message.find("unknown hop encryption 'CurveZMQ' (expected none or curve)"), std::string::npos)
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
  test::expect_input_error([&] { validate_topology(t); }, {"hop_encryption must be \"none\" or \"curve\""});
}

TEST(HopEncryption, BuildersCarryTheSetting) {
  TopologyBuildOptions o;
  o.mode = TopologyMode::Star;
  o.nodes = 3;
  o.public_key = keys_from_map({{0, test::key_hex(0)}, {1, test::key_hex(1)}, {2, test::key_hex(2)}});
  EXPECT_EQ(build_topology(o).federation.hop_encryption, HopEncryption::None);
  o.hop_encryption = HopEncryption::Curve;
  const Topology t = build_topology(o);
  EXPECT_EQ(t.federation.hop_encryption, HopEncryption::Curve);
  EXPECT_EQ(test::parse(to_toml(t)).federation.hop_encryption, HopEncryption::Curve);
}

}  // namespace
}  // namespace fednode
