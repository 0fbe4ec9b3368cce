// The node's state directory: what it stores survives a reopen (a restart), a damaged file is
// named in a clear error, and message ids never repeat.
#include "node/secure_channel.h"
#include "methods/heads/head.h"
#include "node/head_io.h"
#include "node/state_store.h"

#include "../common/expect_error.h"
#include "../common/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace fednode {
namespace {

namespace fs = std::filesystem;

class StateStoreTest : public ::testing::Test {
 protected:
  test::TempDir tmp_{"fednode_state"};
  std::string dir_ = tmp_ / "state";  // not yet there: the store creates it
  RunId run_ = derive_run_id("state-store-test");
};

TEST_F(StateStoreTest, ReceivedAndOutgoingSurviveAReopen) {
  {
    StateStore s(dir_, run_, 1 << 20);
    s.store_received(3, 7, MessageType::Knowledge, "payload-3-7");
    s.store_received(1, 9, MessageType::Complete, "payload-1-9");
    OutboxEntry e;
    e.seq = s.next_seq();
    e.to = 4;
    e.msg_id = s.next_msg_id();
    e.type = MessageType::Head;
    e.phase = 1;
    e.frame = std::string("frame\0bytes", 11);
    e.counted_bytes = 123456789012;
    e.ack_id = 18446744073709551615u;
    s.store_outgoing(e);
    s.mark_acked(e);
  }
  StateStore s(dir_, run_, 1 << 20);
  const auto in = s.received();
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].from, 1u);  // by sender, then message id
  EXPECT_EQ(in[0].type, MessageType::Complete);
  EXPECT_EQ(in[1].plaintext, "payload-3-7");
  const auto out = s.outbox();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to, 4u);
  EXPECT_EQ(out[0].frame, std::string("frame\0bytes", 11));
  EXPECT_EQ(out[0].counted_bytes, 123456789012);
  EXPECT_EQ(out[0].phase, 1);
  EXPECT_TRUE(out[0].acked);
  EXPECT_EQ(out[0].ack_id, 18446744073709551615u) << "for the receipt a restart sends again";
  EXPECT_EQ(s.next_seq(), 2u);
  s.drop_outgoing(1);
  EXPECT_TRUE(s.outbox().empty());
}

// An ack recorded by an older fednode left the file empty: acked, its id unknown. Anything else
// than an id is damage, named.
TEST_F(StateStoreTest, AnAckedMarkerHoldsTheAcksIdOrNothing) {
  fs::path marker;
  {
    StateStore s(dir_, run_, 1 << 20);
    OutboxEntry e;
    e.seq = s.next_seq();
    e.to = 2;
    e.msg_id = s.next_msg_id();
    e.frame = "frame";
    s.store_outgoing(e);
    s.mark_acked(e);  // ack_id 0: not known
  }
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "outbox"))
    if (e.path().extension() == ".acked") marker = e.path();
  ASSERT_FALSE(marker.empty());
  EXPECT_EQ(fs::file_size(marker), 0u);
  {
    StateStore s(dir_, run_, 1 << 20);
    const auto out = s.outbox();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].acked);
    EXPECT_EQ(out[0].ack_id, 0u);
  }
  for (const std::string damage : {"12", "x7\n", "0\n", "99999999999999999999\n"}) {
    std::ofstream(marker, std::ios::binary | std::ios::trunc) << damage;
    StateStore s(dir_, run_, 1 << 20);
    test::expect_input_error([&] { s.outbox(); }, {marker.filename().string(), "acknowledgement's message id"});
  }
}

TEST_F(StateStoreTest, MessageIdsNeverRepeatAcrossRestarts) {
  uint64_t last = 0;
  for (int restart = 0; restart < 3; ++restart) {
    StateStore s(dir_, run_, 1 << 20);
    for (int i = 0; i < 300; ++i) {
      const uint64_t id = s.next_msg_id();
      EXPECT_GT(id, last);
      last = id;
    }
  }
}

TEST_F(StateStoreTest, AnotherRunsDirectoryIsRefused) {
  { StateStore s(dir_, run_, 1 << 20); }
  test::expect_input_error([&] { StateStore other(dir_, derive_run_id("another run"), 1 << 20); },
                           {"belongs to run"});
}

TEST_F(StateStoreTest, ADamagedFileIsNamed) {
  {
    StateStore s(dir_, run_, 1 << 20);
    s.store_received(2, 5, MessageType::Knowledge, "some payload");
  }
  fs::path file;
  for (const auto& e : fs::directory_iterator(fs::path(dir_) / "inbox")) file = e.path();
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('X');
  }
  StateStore s(dir_, run_, 1 << 20);
  test::expect_input_error([&] { s.received(); }, {file.filename().string(), "checksum"});
}

TEST_F(StateStoreTest, ATemporaryFileLeftByAKillIsIgnored) {
  {
    StateStore s(dir_, run_, 1 << 20);
    s.store_received(2, 5, MessageType::Knowledge, "kept");
  }
  std::ofstream(fs::path(dir_) / "inbox" / "0000000009-00000000000000000001.msg.tmp") << "torn";
  StateStore s(dir_, run_, 1 << 20);
  ASSERT_EQ(s.received().size(), 1u);
  EXPECT_EQ(s.received()[0].plaintext, "kept");
}

TEST_F(StateStoreTest, TheHeadAndItsContributorsSurviveAndDamageIsNamed) {
  MatrixF W(2, 3);
  W << 1, 2, 3, 4, 5, 6;
  VectorF b(2);
  b << 0.5f, -0.5f;
  {
    StateStore s(dir_, run_, 1 << 20);
    s.save_head(LinearHead("linear", W, b), {0, 2, 7});
  }
  // The copy for applications is a head file (node/head_io.h).
  EXPECT_EQ(load_head_file(dir_ + "/head")->num_classes(), 2);
  fs::remove(fs::path(dir_) / "head");  // as a crash between the two writes would leave it
  {
    StateStore s(dir_, run_, 1 << 20);
    Contributors c;
    const auto head = s.load_head(&c);
    ASSERT_TRUE(head);
    EXPECT_EQ(c, (Contributors{0, 2, 7}));
    EXPECT_EQ(head->dim(), 3);
  }
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "head")) << "brought back up to date";

  {
    std::fstream f(fs::path(dir_) / "head.state", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(9);  // the first contributor's id
    f.put('\x05');
  }
  StateStore s(dir_, run_, 1 << 20);
  Contributors c;
  test::expect_input_error([&] { s.load_head(&c); }, {"head.state", "checksum"});
}

TEST_F(StateStoreTest, ADamagedMessageIdBlockIsNamed) {
  { StateStore s(dir_, run_, 1 << 20); s.next_msg_id(); }
  {
    std::fstream f(fs::path(dir_) / "msg_ids", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('\x19');  // 257 would become 25: ids handed out again
  }
  test::expect_input_error([&] { StateStore s(dir_, run_, 1 << 20); }, {"msg_ids", "checksum"});
}

TEST_F(StateStoreTest, CountsStarts) {
  for (int i = 0; i < 3; ++i) {
    StateStore s(dir_, run_, 1 << 20);
    EXPECT_EQ(s.count_start(), i);
  }
  // A damaged count is named, not quietly restarted from zero.
  for (const char* damaged : {"abc", "-5", "0", "7 apples", ""}) {
    std::ofstream(fs::path(dir_) / "starts", std::ios::trunc) << damaged;
    StateStore s(dir_, run_, 1 << 20);
    test::expect_input_error([&] { s.count_start(); }, {"starts", "damaged"});
  }
}

}  // namespace
}  // namespace fednode
