// Discovery beacons (docs/protocol.md, section 13): the byte layout another implementation
// follows, and every way a stranger's datagram is refused.
#include "protocol/beacon.h"

#include <gtest/gtest.h>

namespace fednode {
namespace {

Beacon sample() {
  Beacon b;
  for (size_t i = 0; i < b.run.size(); ++i) b.run[i] = static_cast<uint8_t>(0xa0 + i);
  b.node = 0x01020304;
  b.port = 7300;
  for (size_t i = 0; i < b.key.size(); ++i) b.key[i] = static_cast<uint8_t>(i);
  return b;
}

TEST(Beacon, LayoutIsTheDocumentedOne) {
  const std::string bytes = encode_beacon(sample());
  ASSERT_EQ(bytes.size(), kBeaconBytes);
  EXPECT_EQ(bytes.substr(0, 4), "FNDB");
  EXPECT_EQ(static_cast<uint8_t>(bytes[4]), 1);  // version
  EXPECT_EQ(static_cast<uint8_t>(bytes[5]), 0);  // reserved
  EXPECT_EQ(static_cast<uint8_t>(bytes[6]), 7300 >> 8);  // port, big-endian
  EXPECT_EQ(static_cast<uint8_t>(bytes[7]), 7300 & 0xff);
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x01\x02\x03\x04", 4));  // node, big-endian
  EXPECT_EQ(static_cast<uint8_t>(bytes[12]), 0xa0);                   // run tag
  EXPECT_EQ(static_cast<uint8_t>(bytes[19]), 0xa7);
  EXPECT_EQ(static_cast<uint8_t>(bytes[20]), 0);  // public key
  EXPECT_EQ(static_cast<uint8_t>(bytes[51]), 31);
}

TEST(Beacon, RoundTrips) {
  std::string why;
  const auto b = decode_beacon(encode_beacon(sample()), &why);
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(b->node, sample().node);
  EXPECT_EQ(b->port, sample().port);
  EXPECT_EQ(b->run, sample().run);
  EXPECT_EQ(b->key, sample().key);
}

TEST(Beacon, RefusesWhatIsNotABeacon) {
  const std::string good = encode_beacon(sample());
  const auto refused = [](std::string bytes, const std::string& reason) {
    std::string why;
    EXPECT_FALSE(decode_beacon(bytes, &why));
    EXPECT_NE(why.find(reason), std::string::npos) << why;
  };
  refused("", "52 bytes");
  refused(good.substr(0, 51), "52 bytes");
  refused(good + "x", "52 bytes");
  std::string b = good;
  b[0] = 'X';
  refused(b, "magic");
  b = good;
  b[4] = 2;
  refused(b, "version");
  b = good;
  b[5] = 1;
  refused(b, "reserved");
  b = good;
  b[6] = b[7] = 0;
  refused(b, "port 0");
}

}  // namespace
}  // namespace fednode
