// The replay window, and its persistence across a restart.
#include "crypto/replay.h"

#include "core/rng.h"

#include "../common/expect_error.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <set>

namespace fednode {
namespace {

TEST(CryptoReplay, Window) {
  ReplayGuard g;
  EXPECT_EQ(g.accept(1, 5), ReplayVerdict::Fresh);
  EXPECT_EQ(g.accept(1, 5), ReplayVerdict::Duplicate);
  EXPECT_EQ(g.accept(1, 3), ReplayVerdict::Fresh);      // late, but within the window
  EXPECT_EQ(g.accept(1, 3), ReplayVerdict::Duplicate);
  EXPECT_EQ(g.accept(2, 5), ReplayVerdict::Fresh);      // senders are independent
  EXPECT_EQ(g.accept(1, 0), ReplayVerdict::TooOld);     // id 0 is never valid
  EXPECT_EQ(g.accept(1, 5 + ReplayGuard::kWindow), ReplayVerdict::Fresh);
  EXPECT_EQ(g.accept(1, 5), ReplayVerdict::TooOld);     // fell out of the window
  EXPECT_EQ(g.accept(1, 6), ReplayVerdict::Fresh);      // inside it, never seen
  EXPECT_EQ(g.accept(1, 5 + ReplayGuard::kWindow), ReplayVerdict::Duplicate);
  EXPECT_EQ(g.highest(1), 5 + ReplayGuard::kWindow);
  EXPECT_EQ(g.highest(9), 0u);
  // A jump further than the window forgets the old bits but not the order.
  EXPECT_EQ(g.accept(1, 100000), ReplayVerdict::Fresh);
  EXPECT_EQ(g.accept(1, 6), ReplayVerdict::TooOld);
  EXPECT_EQ(g.check(1, 99999), ReplayVerdict::Fresh);
  EXPECT_EQ(g.check(1, 99999), ReplayVerdict::Fresh);   // check() records nothing
  EXPECT_EQ(g.check(1, UINT64_MAX), ReplayVerdict::Fresh);
}

TEST(CryptoReplay, NothingIsAcceptedTwiceInRandomOrder) {
  Rng rng = Rng::stream(3, Purpose::Generic);
  ReplayGuard g;
  std::set<std::pair<NodeId, uint64_t>> accepted;
  for (int i = 0; i < 20000; ++i) {
    const NodeId sender = static_cast<NodeId>(rng.below(4));
    const uint64_t id = 1 + rng.below(3000);
    const bool first = accepted.insert({sender, id}).second;
    const ReplayVerdict v = g.accept(sender, id);
    if (!first) EXPECT_NE(v, ReplayVerdict::Fresh) << sender << " " << id;
    if (first) EXPECT_NE(v, ReplayVerdict::Duplicate) << sender << " " << id;
    if (v != ReplayVerdict::Fresh && first) accepted.erase({sender, id});  // too old: may never be accepted
  }
}

TEST(CryptoReplay, SurvivesARestart) {
  Rng rng = Rng::stream(4, Purpose::Generic);
  ReplayGuard g;
  for (int i = 0; i < 3000; ++i) g.accept(static_cast<NodeId>(rng.below(5)), 1 + rng.below(5000));
  const std::string state = g.serialize();
  const ReplayGuard restored = ReplayGuard::deserialize(state, "state/replay.bin");
  EXPECT_EQ(restored.senders(), g.senders());
  EXPECT_EQ(restored.serialize(), state);
  for (NodeId s = 0; s < 6; ++s)
    for (uint64_t id = 0; id < 6000; ++id) ASSERT_EQ(restored.check(s, id), g.check(s, id)) << s << " " << id;
  EXPECT_EQ(ReplayGuard::deserialize(ReplayGuard().serialize(), "empty").senders(), 0u);
}

TEST(CryptoReplay, CorruptStateIsRefused) {
  ReplayGuard g;
  g.accept(1, 10);
  g.accept(2, 20);
  const std::string state = g.serialize();
  auto refused = [](const std::string& bytes, const std::string& mentions, size_t max_senders = 1 << 20) {
    test::expect_input_error([&] { ReplayGuard::deserialize(bytes, "state/replay.bin", max_senders); },
                             {mentions, "state/replay.bin"});
  };
  for (size_t i = 11; i < state.size(); i += 7) {
    std::string s = state;
    s[i] ^= 0x10;
    refused(s, "checksum");
  }
  refused(state.substr(0, state.size() - 1), "bytes");
  refused(state.substr(0, 10), "too short");
  refused("XXXX" + state.substr(4), "magic");
  refused(state, "more than 1", 1);
  std::string version = state;
  version[4] = 9;
  refused(version, "format 9");

  // Defects a valid checksum does not rule out (a state file written by another tool, or edited
  // and re-summed): each entry at offset 11 + 140 i holds sender (4 bytes), top (8), bitmap.
  auto resummed = [](std::string s) {
    s.resize(s.size() - 16);
    unsigned char sum[16];
    crypto_generichash(sum, sizeof sum, reinterpret_cast<const unsigned char*>(s.data()), s.size(), nullptr, 0);
    return s + std::string(reinterpret_cast<const char*>(sum), sizeof sum);
  };
  ASSERT_EQ(state.size(), 11u + 2 * (12 + ReplayGuard::kWindow / 8) + 16);
  EXPECT_NO_THROW(ReplayGuard::deserialize(resummed(state), "state/replay.bin"));
  const size_t second = 11 + 12 + ReplayGuard::kWindow / 8;
  std::string duplicate = state;
  duplicate[second] = 1;  // sender 2 becomes a second sender 1
  refused(resummed(duplicate), "strictly increasing");
  std::string top_zero = state;
  for (size_t i = 0; i < 8; ++i) top_zero[second + 4 + i] = 0;  // seen[0] stays set
  refused(resummed(top_zero), "inconsistent");
}

}  // namespace
}  // namespace fednode
