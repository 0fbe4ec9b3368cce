// The node's ZeroMQ transport over real TCP sockets: frames and replies travel, an oversized
// frame is dropped before it is allocated, and a busy address is a clear error.
#include "node/transport.h"

#include "../common/expect_error.h"

#include "deliver.h"

#include <gtest/gtest.h>

#include <thread>

namespace fednode {
namespace {

using std::chrono::milliseconds;

using test::deliver;

TEST(Transport, FramesAndRepliesTravel) {
  Transport a(0, "tcp://127.0.0.1:23611"), b(1, "tcp://127.0.0.1:23612");
  a.add_peer(1, "tcp://127.0.0.1:23612");
  const std::string frame(100000, 'x');
  auto in = deliver(a, 1, b, frame);
  ASSERT_TRUE(in);
  EXPECT_EQ(in->frame.view(), frame);
  EXPECT_FALSE(in->via_dealer);
  ASSERT_TRUE(b.reply(*in, "ack"));
  auto back = a.receive(milliseconds(2000));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->frame.view(), "ack");
  ASSERT_TRUE(back->via_dealer);
  EXPECT_EQ(*back->via_dealer, 1u);
}

TEST(Transport, AnOversizedFrameIsDroppedAndTheLinkRecovers) {
  TransportOptions small;
  small.max_message_bytes = 1000;
  Transport a(0, "tcp://127.0.0.1:23621"), b(1, "tcp://127.0.0.1:23622", small);
  a.add_peer(1, "tcp://127.0.0.1:23622");
  ASSERT_TRUE(deliver(a, 1, b, "hello"));
  a.send(1, std::string(5000, 'y'));
  EXPECT_FALSE(b.receive(milliseconds(500))) << "a frame over max_message_bytes must not arrive";
  auto in = deliver(a, 1, b, "after");  // the DEALER reconnects by itself
  ASSERT_TRUE(in);
  EXPECT_EQ(in->frame.view(), "after");
}

TEST(Transport, ABusyAddressIsAClearError) {
  Transport a(0, "tcp://127.0.0.1:23631");
  test::expect_input_error([] { Transport b(1, "tcp://127.0.0.1:23631"); }, {"tcp://127.0.0.1:23631"});
  EXPECT_THROW(a.send(9, "x"), InputError);  // a peer never added
}

// libzmq retries a peer whose host does not resolve without a word; the node says it once.
TEST(Transport, AHostThatDoesNotResolveIsNamed) {
  EXPECT_EQ(Transport::resolution_problem("tcp://127.0.0.1:7000"), "");
  EXPECT_EQ(Transport::resolution_problem("tcp://[::1]:7000"), "");
  EXPECT_EQ(Transport::resolution_problem("tcp://localhost:7000"), "");
  EXPECT_EQ(Transport::resolution_problem("ipc:///tmp/x"), "");
  const std::string problem = Transport::resolution_problem("tcp://no-such-host.invalid:7000");
  EXPECT_NE(problem.find("host 'no-such-host.invalid' does not resolve"), std::string::npos) << problem;
}

}  // namespace
}  // namespace fednode
