// Nodes that accept no connections, over real TCP sockets: a reachable peer answers on the
// connection a dial-only one made, and two dial-only peers meet at a relay (node/relay.h), which
// tells a sender when the far end's connection closed and refuses circuits not of their key.
#include "node/circuit.h"
#include "node/relay.h"
#include "node/transport.h"

#include "deliver.h"

#include <gtest/gtest.h>
#include <zmq.hpp>

#include <atomic>
#include <thread>

namespace fednode {
namespace {

using std::chrono::milliseconds;

using test::deliver;

// A relay stepping in a thread of its own while the test runs.
struct RunningRelay {
  explicit RunningRelay(RelayOptions o) : relay(std::move(o)), thread([this] { relay.run(stop); }) {}
  ~RunningRelay() { finish(); }
  RelayCounters finish() {
    stop = true;
    if (thread.joinable()) thread.join();
    return relay.counters();
  }
  std::atomic<bool> stop{false};
  Relay relay;
  std::thread thread;
};

RelayOptions listening_on(const std::string& bind) {
  RelayOptions o;
  o.bind = bind;
  return o;
}

TransportOptions dial_only() {
  TransportOptions o;
  o.dial_only = true;
  return o;
}

PeerRoute answered() {
  PeerRoute r;
  r.kind = PeerRoute::Kind::Answer;
  return r;
}

PeerRoute through(const std::string& relay_address) {
  PeerRoute r;
  r.kind = PeerRoute::Kind::Relay;
  RelayPoint point;
  point.name = "r1";
  point.address = relay_address;
  r.relays.push_back(point);
  return r;
}

TEST(DialOnly, AReachablePeerSendsAndAnswersOnTheConnectionItWasDialledOn) {
  TransportOptions hidden = dial_only();
  Transport b(1, "tcp://127.0.0.1:23761");
  Transport a(0, "tcp://127.0.0.1:23762", hidden);  // binds nothing
  EXPECT_EQ(a.bind_address(), "");
  a.add_peer(1, "tcp://127.0.0.1:23761");
  b.add_peer(0, answered());
  // b speaks first: a dialled b at once, though it has sent nothing yet.
  auto in = deliver(b, 0, a, "knowledge");
  ASSERT_TRUE(in);
  EXPECT_EQ(in->frame.view(), "knowledge");
  ASSERT_TRUE(in->via_dealer);
  EXPECT_EQ(*in->via_dealer, 1u);
  ASSERT_TRUE(a.reply(*in, "ack"));
  auto back = b.receive(milliseconds(2000));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->frame.view(), "ack");
  EXPECT_EQ(back->route, circuit_id(0, 1));
  // Its connection closing is a break for b: what was handed to it may be lost.
  const uint64_t before = b.breaks(0);
  a.drop_queued(1);  // closes a's connection (and dials again: a is dial-only)
  for (int i = 0; i < 40 && b.breaks(0) == before; ++i) b.receive(milliseconds(50));
  EXPECT_GT(b.breaks(0), before);
  EXPECT_TRUE(deliver(b, 0, a, "again"));
}

TEST(Relay, TwoDialOnlyPeersMeetAndHearWhenTheOtherLeaves) {
  RunningRelay r(listening_on("tcp://127.0.0.1:23763"));
  TransportOptions hidden = dial_only();
  Transport a(0, "", hidden);
  auto c = std::make_unique<Transport>(2, "", hidden);
  a.add_peer(2, through("tcp://127.0.0.1:23763"));
  c->add_peer(0, through("tcp://127.0.0.1:23763"));
  const std::string frame(300000, 'k');
  auto in = deliver(a, 2, *c, frame);
  ASSERT_TRUE(in);
  EXPECT_EQ(in->frame.view(), frame);
  ASSERT_TRUE(c->reply(*in, "ack"));
  std::optional<Incoming> back;
  for (int i = 0; i < 40 && !back; ++i) back = a.receive(milliseconds(50));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->frame.view(), "ack");
  EXPECT_EQ(*back->via_dealer, 2u);
  const uint64_t before = a.breaks(2);
  c.reset();  // the far end goes away: the relay tells a
  for (int i = 0; i < 40 && a.breaks(2) == before; ++i) a.receive(milliseconds(50));
  EXPECT_GT(a.breaks(2), before);
  const RelayCounters counted = r.finish();
  EXPECT_EQ(counted.frames, 2u);
  EXPECT_EQ(counted.bytes, frame.size() + 3);
  EXPECT_EQ(counted.refused, 0u);
  EXPECT_GE(counted.peer_left_notes, 1u);
}

TEST(Relay, FramesForAnAbsentPeerWaitForIt) {
  RunningRelay r(listening_on("tcp://127.0.0.1:23764"));
  TransportOptions hidden = dial_only();
  Transport a(0, "", hidden);
  a.add_peer(2, through("tcp://127.0.0.1:23764"));
  for (int i = 0; i < 20 && !a.send(2, "early"); ++i) a.receive(milliseconds(20));
  a.receive(milliseconds(300));  // on its way to the relay, which has nobody to hand it to
  Transport c(2, "", hidden);
  c.add_peer(0, through("tcp://127.0.0.1:23764"));
  std::optional<Incoming> in;
  for (int i = 0; i < 60 && !in; ++i) in = c.receive(milliseconds(50));
  ASSERT_TRUE(in);
  EXPECT_EQ(in->frame.view(), "early");
}

TEST(Relay, PeersMoveOnToTheNextRelayWhenTheFirstIsDown) {
  RunningRelay r(listening_on("tcp://127.0.0.1:23766"));
  TransportOptions hidden = dial_only();
  hidden.relay_failover_ms = 300;
  PeerRoute route = through("tcp://127.0.0.1:23767");  // nobody listens there
  RelayPoint second;
  second.name = "r2";
  second.address = "tcp://127.0.0.1:23766";
  route.relays.push_back(second);
  Transport a(0, "", hidden), c(2, "", hidden);
  a.add_peer(2, route);
  c.add_peer(0, route);
  std::optional<Incoming> in;
  for (int i = 0; i < 100 && !in; ++i) {
    a.send(2, "over r2");
    a.receive(milliseconds(20));  // where a notices that its relay is down
    in = c.receive(milliseconds(20));
  }
  ASSERT_TRUE(in);
  EXPECT_EQ(in->frame.view(), "over r2");
  EXPECT_GE(a.breaks(2), 1u);  // what went towards r1 counts as lost
}

TEST(Relay, ACircuitOfANodeOutsideTheFederationIsRefused) {
  RelayOptions o;
  o.bind = "tcp://127.0.0.1:23768";
  o.nodes = {0, 2};
  RunningRelay r(o);
  zmq::context_t context;
  for (const auto& [from, to] : {std::pair<NodeId, NodeId>{0, 9}, {9, 2}, {2, 2}}) {
    zmq::socket_t s(context, zmq::socket_type::dealer);
    s.set(zmq::sockopt::routing_id, circuit_id(from, to));
    s.set(zmq::sockopt::linger, 500);
    s.connect("tcp://127.0.0.1:23768");
    s.send(zmq::buffer(std::string("made up")), zmq::send_flags::none);
  }
  std::this_thread::sleep_for(milliseconds(700));
  const RelayCounters c = r.finish();
  EXPECT_EQ(c.refused, 3u);
  EXPECT_EQ(c.circuits, 0u) << "no state is kept for a circuit it refused";
}

TEST(Relay, ACircuitNamedForAnotherKeyIsRefused) {
  std::array<uint8_t, 32> seed{};
  std::map<NodeId, PublicKey> keys;
  std::vector<std::shared_ptr<const CurveKeyPair>> pairs;
  for (uint8_t i = 0; i < 4; ++i) {  // nodes 0, 1, 2 and the relay (3)
    seed[0] = i + 1;
    pairs.push_back(std::make_shared<const CurveKeyPair>(Identity::from_seed(seed)));
    if (i < 3) keys[i] = pairs.back()->public_key();
  }
  RelayOptions o;
  o.bind = "tcp://127.0.0.1:23765";
  o.keys = pairs[3];
  o.allowed = keys;
  RunningRelay r(o);
  TransportOptions hidden = dial_only();
  hidden.curve.keys = pairs[2];
  hidden.curve.peers = keys;
  Transport c(2, "", hidden);
  PeerRoute route = through("tcp://127.0.0.1:23765");
  route.relays[0].key = pairs[3]->public_key();
  c.add_peer(0, route);
  // Node 1, admitted, claims node 0's circuit to node 2.
  zmq::context_t context;
  zmq::socket_t liar(context, zmq::socket_type::dealer);
  liar.set(zmq::sockopt::routing_id, circuit_id(0, 2));
  liar.set(zmq::sockopt::linger, 0);
  pairs[1]->make_client(liar.handle(), pairs[3]->public_key());
  liar.connect("tcp://127.0.0.1:23765");
  for (int i = 0; i < 10; ++i) liar.send(zmq::buffer(std::string("forged")), zmq::send_flags::dontwait);
  EXPECT_FALSE(c.receive(milliseconds(1500))) << "a frame on a circuit not of its sender's key was carried";
  EXPECT_GT(r.finish().refused, 0u);
}

}  // namespace
}  // namespace fednode
