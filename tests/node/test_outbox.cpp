// The node's outbox over a real socket: one unsettled frame per peer at a time, in queue order;
// resends until the peer answers; acknowledgements and refusals are stored, so a restart resends
// only what is still open.
#include "node/outbox.h"
#include "node/secure_channel.h"
#include "node/transport.h"

#include "../common/temp_dir.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>

namespace fednode {
namespace {

using std::chrono::milliseconds;

class OutboxTest : public ::testing::Test {
 protected:
  test::TempDir tmp_{"fednode_outbox"};
  StateStore store_{tmp_ / "state", derive_run_id("outbox-test"), (1 << 20) + 4096};  // a 1 MiB frame and its record
  std::vector<std::string> said_;

  Outbox make(Transport& transport) {
    return Outbox(store_, transport, OutboxTiming{milliseconds(20), milliseconds(40), 3600.0},
                  [this](const std::string& line) { said_.push_back(line); },
                  [](NodeId id) { return "node " + std::to_string(id); });
  }

  // Queues a frame as the node does: the next seq is taken from the store, so add before the next.
  OutboxEntry add(Outbox& outbox, NodeId to, const std::string& frame, int phase = 1) {
    OutboxEntry e;
    e.seq = store_.next_seq();
    e.to = to;
    e.msg_id = store_.next_msg_id();
    e.type = phase == kOfferPhase ? MessageType::Head : MessageType::Knowledge;
    e.phase = phase;
    e.frame = frame;
    outbox.add(e);
    return e;
  }

  // Pumps for a while (the DEALER connects in the background; resends fall due) and returns
  // every frame `peer` received, in order.
  static std::vector<std::string> frames(Outbox& outbox, Transport& peer, SendTally* tally = nullptr) {
    std::vector<std::string> got;
    for (int i = 0; i < 400 && got.size() < 3; ++i) {
      const SendTally t = outbox.pump();
      if (tally) {
        tally->messages += t.messages;
        tally->resends += t.resends;
      }
      if (auto in = peer.receive(milliseconds(10))) got.emplace_back(in->frame.view());
    }
    return got;
  }
};

TEST_F(OutboxTest, APeerGetsItsNextFrameOnlyOnceThePreviousIsSettled) {
  Transport self(0, "tcp://127.0.0.1:23641"), peer(1, "tcp://127.0.0.1:23642");
  self.add_peer(1, "tcp://127.0.0.1:23642");
  Outbox outbox = make(self);
  // The first frame is large, so its resends wait longer (for the transfer) than the small
  // frame behind it would: only stop-and-wait keeps that one back.
  const std::string big(1 << 20, 'f');
  const OutboxEntry first = add(outbox, 1, big), second = add(outbox, 1, "second");
  const OutboxEntry third = add(outbox, 1, "third");

  SendTally tally;
  // Unanswered, the same frame comes again, never one queued behind it.
  using Frames = std::vector<std::string>;
  EXPECT_EQ(frames(outbox, peer, &tally), (Frames{big, big, big}));
  EXPECT_EQ(tally.messages, 1);
  EXPECT_GE(tally.resends, 2);
  EXPECT_FALSE(outbox.settled());

  EXPECT_TRUE(outbox.acknowledged(1, first.msg_id, 41));
  EXPECT_EQ(frames(outbox, peer), (Frames{"second", "second", "second"}));
  outbox.refused(1, second.msg_id);  // a refusal settles a frame too
  EXPECT_EQ(frames(outbox, peer), (Frames{"third", "third", "third"}));
  EXPECT_EQ(outbox.unacknowledged(), std::vector<NodeId>{1});
  EXPECT_EQ(outbox.refusers(), std::vector<NodeId>{1});

  EXPECT_TRUE(outbox.acknowledged(1, third.msg_id, 43));
  EXPECT_TRUE(outbox.settled());
  EXPECT_TRUE(outbox.unacknowledged().empty());
  // A repeated ack is still of our frame: the node answers it with a receipt again. The first
  // ack's id is the one recorded (a restart sends its receipt again); a refusal has none.
  EXPECT_TRUE(outbox.acknowledged(1, third.msg_id, 44));
  using Acks = std::vector<std::pair<NodeId, uint64_t>>;
  EXPECT_EQ(outbox.recorded_acks(), (Acks{{1, 41}, {1, 43}}));
  EXPECT_FALSE(outbox.acknowledged(2, third.msg_id));  // the id is ours, but not the frame we sent node 2
  EXPECT_FALSE(outbox.acknowledged(1, 999));  // an ack for nothing it sent changes nothing
  EXPECT_TRUE(outbox.settled());
}

// Large frames go out a window at a time: a star's hub sending its head to every leaf would
// otherwise hold every sealed copy at once. Each counts until it is acknowledged or its hold
// ends; small frames are not held back. Ports 23750-23754 (nobody listens: the one-frame queue
// of each DEALER takes the frame all the same).
TEST_F(OutboxTest, LargeFramesGoOutAWindowAtATime) {
  Transport self(0, "tcp://127.0.0.1:23750");
  for (NodeId peer = 1; peer <= 4; ++peer) self.add_peer(peer, "tcp://127.0.0.1:" + std::to_string(23750 + peer));
  OutboxTiming timing{milliseconds(20), milliseconds(3600 * 1000), 3600.0};
  timing.send_window = 2;
  timing.window_hold = milliseconds(300);
  Outbox outbox(store_, self, timing, [](const std::string&) {}, [](NodeId id) { return "node " + std::to_string(id); });
  const std::string big(512 << 10, 'b');
  std::vector<OutboxEntry> sent;
  for (NodeId peer = 1; peer <= 4; ++peer) sent.push_back(add(outbox, peer, big));
  add(outbox, 4, "small, behind the large frame to node 4");
  EXPECT_EQ(outbox.pump().messages, 2);
  EXPECT_EQ(outbox.pump().messages, 0);
  EXPECT_TRUE(outbox.acknowledged(1, sent[0].msg_id));
  EXPECT_EQ(outbox.pump().messages, 1);  // node 3's
  std::this_thread::sleep_for(milliseconds(350));
  EXPECT_EQ(outbox.pump().messages, 1);  // node 4's: the others' hold ended
}

// A live connection loses nothing, so a frame goes out once however long its acknowledgement
// takes; a connection that breaks may have lost it, and it goes out again at once.
TEST_F(OutboxTest, AFrameIsResentWhenItsConnectionBreaksAndNotBefore) {
  Transport self(0, "tcp://127.0.0.1:23601");
  self.add_peer(1, "tcp://127.0.0.1:23602");
  Outbox outbox(store_, self, OutboxTiming{milliseconds(20), milliseconds(3600 * 1000), 3600.0},
                [](const std::string&) {}, [](NodeId id) { return "node " + std::to_string(id); });
  add(outbox, 1, "knowledge");
  const auto received = [&](Transport& peer, milliseconds for_how_long) {
    int got = 0;
    for (const auto until = std::chrono::steady_clock::now() + for_how_long; std::chrono::steady_clock::now() < until;) {
      outbox.pump();
      self.receive(milliseconds(5));  // where the transport hears of a broken connection
      if (auto in = peer.receive(milliseconds(5))) {
        EXPECT_EQ(in->frame.view(), "knowledge");
        ++got;
      }
    }
    return got;
  };
  {
    Transport peer(1, "tcp://127.0.0.1:23602");
    EXPECT_EQ(received(peer, milliseconds(1500)), 1) << "no resend on a connection that did not break";
    EXPECT_EQ(self.breaks(1), 0u);
  }
  Transport restarted(1, "tcp://127.0.0.1:23602");
  EXPECT_EQ(received(restarted, milliseconds(3000)), 1) << "sent again once the connection broke";
  EXPECT_GE(self.breaks(1), 1u);
}

TEST_F(OutboxTest, WhatIsSettledIsStoredAndARestartResendsOnlyTheRest) {
  Transport self(0, "tcp://127.0.0.1:23651"), peer(2, "tcp://127.0.0.1:23652");
  self.add_peer(2, "tcp://127.0.0.1:23652");
  {
    Outbox outbox = make(self);
    const OutboxEntry a = add(outbox, 2, "a"), b = add(outbox, 2, "b");
    add(outbox, 2, "c");
    outbox.acknowledged(2, a.msg_id);
    outbox.refused(2, b.msg_id);
  }
  const auto stored = store_.outbox();
  ASSERT_EQ(stored.size(), 3u);
  EXPECT_TRUE(stored[0].acked);
  EXPECT_TRUE(stored[1].failed);
  EXPECT_FALSE(stored[2].acked || stored[2].failed);

  Outbox restarted = make(self);
  restarted.restore(stored);
  EXPECT_FALSE(restarted.settled());
  EXPECT_EQ(frames(restarted, peer), (std::vector<std::string>{"c", "c", "c"}));
  EXPECT_EQ(restarted.refusers(), std::vector<NodeId>{2});
}

TEST_F(OutboxTest, APeerSilentPastTheWarningIsReportedOnce) {
  Transport self(0, "tcp://127.0.0.1:23661");
  self.add_peer(3, "tcp://127.0.0.1:23662");  // nobody there: sends queue up or fail, nothing answers
  Outbox outbox(store_, self, OutboxTiming{milliseconds(1), milliseconds(2), 0.05},
                [this](const std::string& line) { said_.push_back(line); },
                [](NodeId id) { return "node " + std::to_string(id); });
  add(outbox, 3, "x");
  for (int i = 0; i < 40; ++i) {
    outbox.pump();
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(said_.size(), 1u);
  EXPECT_NE(said_[0].find("node 3 has not acknowledged"), std::string::npos) << said_[0];
  // The node sleeps no longer than until that peer's next resend.
  EXPECT_LE(outbox.until_next_resend(milliseconds(1000)), milliseconds(2));
}

// Offers (a hub's refitted head) go to leaves that may have closed: one nobody takes is given up
// once its time is over, however far apart its resends are, without counting as unacknowledged;
// a newer offer to the same peer replaces an older one; both stay so across a restart.
TEST_F(OutboxTest, OffersAreGivenUpInTimeAndReplacedByNewerOnes) {
  Transport self(0, "tcp://127.0.0.1:23671"), peer(4, "tcp://127.0.0.1:23672");  // it never answers
  self.add_peer(4, "tcp://127.0.0.1:23672");
  self.add_peer(5, "tcp://127.0.0.1:23673");  // nobody there
  const auto timing = OutboxTiming{milliseconds(1000), milliseconds(1000), 0.1};  // resends 1 s apart
  const auto say = [this](const std::string& line) { said_.push_back(line); };
  const auto who = [](NodeId id) { return "node " + std::to_string(id); };
  {
    Outbox outbox(store_, self, timing, say, who);
    add(outbox, 4, "head-a", kOfferPhase);
    std::optional<Incoming> in;
    for (int i = 0; i < 100 && !in; ++i) {
      outbox.pump();  // sent once; the next resend is a second away
      in = peer.receive(milliseconds(10));
    }
    ASSERT_TRUE(in);
    EXPECT_EQ(in->frame.view(), "head-a");
    const OutboxEntry new_offer = add(outbox, 4, "head-b", kOfferPhase);
    add(outbox, 5, "head-b", kOfferPhase);
    EXPECT_FALSE(outbox.settled());
    // The newer offer goes out at once: the older one no longer holds the peer's queue.
    outbox.pump();
    in = peer.receive(milliseconds(500));
    ASSERT_TRUE(in);
    EXPECT_EQ(in->frame.view(), "head-b");
    const auto started = std::chrono::steady_clock::now();
    while (!outbox.settled() && std::chrono::steady_clock::now() - started < std::chrono::seconds(5)) {
      std::this_thread::sleep_for(outbox.until_next_resend(milliseconds(1000)));
      outbox.pump();
    }
    EXPECT_TRUE(outbox.settled());
    EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(800)) << "not at the next resend, 1 s on";
    EXPECT_TRUE(outbox.unacknowledged().empty());
    EXPECT_TRUE(outbox.refusers().empty());
    ASSERT_EQ(said_.size(), 2u);  // one line per offer that ran out, none for the replaced one
    EXPECT_NE(said_[0].find("did not acknowledge head " + std::to_string(new_offer.msg_id) +
                            " in the 0.1 s it was offered for"),
              std::string::npos)
        << said_[0];
  }
  const auto stored = store_.outbox();
  ASSERT_EQ(stored.size(), 3u);
  for (const auto& e : stored) EXPECT_TRUE(e.given_up) << "offer " << e.msg_id;
  Outbox restarted(store_, self, timing, say, who);
  restarted.restore(stored);
  EXPECT_TRUE(restarted.settled()) << "a restart does not offer again what was given up";
  EXPECT_EQ(restarted.pump().messages, 0);
}

// An offer sent to a peer that is down waits in that peer's queue; replaced by a newer one, it
// must not be what the peer gets when it comes back.
TEST_F(OutboxTest, AReplacedOfferIsNotDeliveredWhenThePeerComesBack) {
  Transport self(0, "tcp://127.0.0.1:23691");
  self.add_peer(7, "tcp://127.0.0.1:23692");
  Outbox outbox = make(self);
  add(outbox, 7, "head-old", kOfferPhase);
  for (int i = 0; i < 5; ++i) {
    outbox.pump();  // queued for a peer that is not there
    std::this_thread::sleep_for(milliseconds(30));
  }
  add(outbox, 7, "head-new", kOfferPhase);
  Transport peer(7, "tcp://127.0.0.1:23692");  // the peer comes back
  EXPECT_EQ(frames(outbox, peer), (std::vector<std::string>{"head-new", "head-new", "head-new"}));
}

// A node killed between storing a new offer and noting the old one replaced: the restart settles it.
TEST_F(OutboxTest, ARestartKeepsOnlyTheNewestOpenOfferPerPeer) {
  Transport self(0, "tcp://127.0.0.1:23681"), peer(6, "tcp://127.0.0.1:23682");
  self.add_peer(6, "tcp://127.0.0.1:23682");
  for (const char* frame : {"head-a", "head-b"}) {
    OutboxEntry e;
    e.seq = store_.next_seq();
    e.to = 6;
    e.msg_id = store_.next_msg_id();
    e.type = MessageType::Head;
    e.phase = kOfferPhase;
    e.frame = frame;
    store_.store_outgoing(e);  // as Outbox::add stores it, before it replaces anything
  }
  Outbox restarted = make(self);
  restarted.restore(store_.outbox());
  EXPECT_EQ(frames(restarted, peer), (std::vector<std::string>{"head-b", "head-b", "head-b"}));
  EXPECT_TRUE(store_.outbox()[0].given_up);
}

}  // namespace
}  // namespace fednode
