// CurveZMQ on each hop ([federation] hop_encryption = "curve", docs/security.md "Layer 2"):
//  - in process, two transports: frames and replies pass; a client that expects another server key
//    never connects; a client whose key is not listed is refused by the ZAP handler, which says so;
//  - real node processes: a curve chain ends equal to `fednode simulate`, and a live curve node
//    answers neither a plain-TCP client nor a CURVE client with a key outside the topology, logs
//    the refusal, never parses a byte from either, and still finishes its run.
#include "federation.h"

#include "crypto/curve.h"
#include "node/transport.h"

#include <gtest/gtest.h>
#include <zmq.h>
#include <zmq.hpp>

#include <chrono>
#include <thread>

namespace fednode::testing_network {
namespace {

using namespace std::chrono_literals;

// Turns hop encryption on in a federation written by make_federation. The file names its run
// explicitly, so the run id stays the same.
void use_curve(Federation& f) {
  std::string text = read_text(f.file);
  const auto at = text.find("[federation]\n");
  ASSERT_NE(at, std::string::npos) << text;
  text.insert(at + 13, "hop_encryption = \"curve\"\n");
  std::ofstream(f.file, std::ios::trunc) << text;
  f.topology = load_topology(f.file.string());
  ASSERT_EQ(f.topology.federation.hop_encryption, HopEncryption::Curve);
}

// A CURVE key pair unrelated to any fednode identity, made the way any ZeroMQ program would.
struct ForeignKeys {
  std::array<uint8_t, 32> public_key{}, secret_key{};
  ForeignKeys() {
    char pub[41], sec[41];
    if (zmq_curve_keypair(pub, sec) != 0) throw std::runtime_error("zmq_curve_keypair failed");
    zmq_z85_decode(public_key.data(), pub);
    zmq_z85_decode(secret_key.data(), sec);
  }
  std::string hex() const { return PublicKey{public_key}.to_hex(); }
};

// Sends one frame and waits `ms` for any reply.
bool answered(zmq::socket_t& s, const std::string& frame, int ms) {
  s.send(zmq::buffer(frame), zmq::send_flags::dontwait);
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  return zmq::poll(&item, 1, std::chrono::milliseconds(ms)) > 0;
}

struct CurveNode {
  Identity identity = Identity::generate();
  std::shared_ptr<const CurveKeyPair> keys = std::make_shared<const CurveKeyPair>(identity);
};

TransportOptions curve_options(const CurveNode& self, const std::map<NodeId, PublicKey>& peers,
                               std::vector<std::string>* log = nullptr) {
  TransportOptions o;
  o.linger_ms = 0;
  o.curve.keys = self.keys;
  o.curve.peers = peers;
  if (log) o.log = [log](const std::string& line) { log->push_back(line); };
  return o;
}

// Polls both transports until `from` can hand the frame over (its DEALER finished the CURVE
// handshake, which the other side's ZAP handler answers inside receive()).
bool send_when_connected(Transport& from, Transport& to, NodeId peer, const std::string& frame,
                         std::optional<Incoming>* got, std::chrono::milliseconds within) {
  const auto end = std::chrono::steady_clock::now() + within;
  bool sent = false;
  while (std::chrono::steady_clock::now() < end) {
    if (!sent) sent = from.send(peer, frame);
    if (auto in = to.receive(20ms)) {
      *got = std::move(in);
      return true;
    }
  }
  return false;
}

TEST(Curve, TransportsTalkOnlyWithTheKeysTheyExpect) {
  ASSERT_TRUE(curve_available()) << "this libzmq has no CURVE";
  CurveNode a, b, stranger;
  const std::map<NodeId, PublicKey> both = {{0, a.identity.public_key()}, {1, b.identity.public_key()}};
  std::vector<std::string> b_log;
  Transport ta(0, "tcp://127.0.0.1:23530", curve_options(a, both));
  Transport tb(1, "tcp://127.0.0.1:23531", curve_options(b, both, &b_log));
  ta.add_peer(1, "tcp://127.0.0.1:23531");
  tb.add_peer(0, "tcp://127.0.0.1:23530");

  // A listed key: the frame arrives, and the reply goes back on the same connection.
  std::optional<Incoming> in;
  ASSERT_TRUE(send_when_connected(ta, tb, 1, "hello over curve", &in, 5000ms));
  EXPECT_EQ(in->frame.view(), "hello over curve");
  ASSERT_TRUE(tb.reply(*in, "ack"));
  std::optional<Incoming> back;
  for (int i = 0; i < 100 && !back; ++i) back = ta.receive(20ms);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->frame.view(), "ack");
  EXPECT_EQ(tb.curve_refusals(), 0);

  // A client that believes node 1 has another key (a man in the middle, seen from the client):
  // the handshake fails on the client's side, so nothing is ever handed over.
  Transport tc(0, "tcp://127.0.0.1:23532",
               curve_options(a, {{0, a.identity.public_key()}, {1, stranger.identity.public_key()}}));
  tc.add_peer(1, "tcp://127.0.0.1:23531");
  std::optional<Incoming> none;
  EXPECT_FALSE(send_when_connected(tc, tb, 1, "to the wrong server", &none, 1500ms));
  EXPECT_EQ(tb.curve_refusals(), 0);  // the server cannot even open the client's HELLO: no ZAP request

  // A client with a key node 1 does not list: the ZAP handler refuses it, and says so once per
  // 1, 10, 100, ... attempts rather than at every reconnect.
  Transport ts(2, "tcp://127.0.0.1:23533",
               curve_options(stranger, {{1, b.identity.public_key()}, {2, stranger.identity.public_key()}}));
  ts.add_peer(1, "tcp://127.0.0.1:23531");
  EXPECT_FALSE(send_when_connected(ts, tb, 1, "from a stranger", &none, 1500ms));
  EXPECT_GE(tb.curve_refusals(), 1);
  ASSERT_FALSE(b_log.empty());
  EXPECT_NE(b_log[0].find("CurveZMQ: refused a connection from 127.0.0.1"), std::string::npos) << b_log[0];
  EXPECT_NE(b_log[0].find(stranger.identity.public_key().to_hex()), std::string::npos) << b_log[0];
  EXPECT_NE(b_log[0].find("public key not in the topology"), std::string::npos) << b_log[0];
  size_t powers_of_ten = 0;
  for (int64_t n = 1; n <= tb.curve_refusals(); n *= 10) ++powers_of_ten;
  EXPECT_EQ(b_log.size(), powers_of_ten) << tb.curve_refusals() << " refusals";

  // A peer without a key cannot be added to a curve transport.
  EXPECT_THROW(ta.add_peer(5, "tcp://127.0.0.1:23539"), InputError);
}

TEST(Curve, TopologyCommandWritesTheSetting) {
  const auto dir = test_dir("curve");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string file = (dir / "t.toml").string();
  const CliRun made = run_cli("topology linear --nodes 2 --hop-encryption curve --out " + file);
  ASSERT_EQ(made.code, 0) << made.output;
  EXPECT_EQ(load_topology(file).federation.hop_encryption, HopEncryption::Curve);
  const CliRun bad = run_cli("topology linear --nodes 2 --hop-encryption tls --out " + (dir / "u.toml").string());
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--hop-encryption: unknown hop encryption 'tls' (expected none, curve or auto)"),
            std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(dir / "u.toml"));
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

TEST(Curve, ChainMatchesTheSimulator) {
  const auto dir = test_dir("curve");
  Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedcgs", 23500, {},
                                 {{"dataset", "fashion-mnist"}, {"train-limit", "3000"}, {"test-limit", "1000"},
                                  {"partition", "dirichlet"}, {"dirichlet-alpha", "0.5"}, {"min-samples", "20"}});
  use_curve(f);

  const CliRun launch = run_cli("launch " + f.file.string() + " --quiet --timeout 300");
  ASSERT_EQ(launch.code, 0) << launch.output;

  expect_every_node_equals_simulate(f);
  for (NodeId id : f.topology.ids()) {
    EXPECT_EQ(read_result(f.state_dir(id)).frames_rejected, 0) << "node " << id;
    const std::string log = read_text(f.state_dir(id) / "node.log");
    EXPECT_EQ(log.find("CurveZMQ: refused"), std::string::npos) << "node " << id << ": " << log;
  }
  if (::testing::Test::HasFailure()) std::cerr << launch.output;
  else fs::remove_all(dir);
}

TEST(Curve, PlainAndUnlistedClientsAreShutOutAndTheRunStillCompletes) {
  const auto dir = test_dir("curve");
  Federation f = make_federation(dir, TopologyMode::Linear, 2, "fedcgs", 23510, {},
                                 {{"dataset", "fashion-mnist"}, {"train-limit", "2000"}, {"test-limit", "500"},
                                  {"partition", "iid"}});
  use_curve(f);
  const std::string node1 = f.topology.node(1).address;
  const pid_t p1 = spawn_node(f, 1);
  // Node 1 describes its plan once its ROUTER is bound; from then on it waits for node 0 (up to
  // its deadline), so the clients below meet a listening node, not a port still closed.
  for (int i = 0; i < 600 && read_text(f.state_dir(1) / "node.log").find("waits for") == std::string::npos; ++i)
    std::this_thread::sleep_for(100ms);
  if (read_text(f.state_dir(1) / "node.log").find("hops: CurveZMQ") == std::string::npos) {
    ::kill(p1, SIGKILL);
    ::waitpid(p1, nullptr, 0);
    FAIL() << "node 1 did not start with CurveZMQ:\n" << read_text(f.state_dir(1) / "node.log");
  }

  zmq::context_t ctx;
  // (b) A plain-TCP client: its NULL handshake meets a CURVE server, which drops the connection.
  zmq::socket_t plain(ctx, zmq::socket_type::dealer);
  plain.set(zmq::sockopt::linger, 0);
  plain.connect(node1);
  EXPECT_FALSE(answered(plain, std::string(64, 'x'), 2000)) << "a plain-TCP client was answered";

  // (c) A CURVE client that knows node 1's public key but holds a key the topology does not list.
  const ForeignKeys foreign;
  zmq::socket_t unlisted(ctx, zmq::socket_type::dealer);
  unlisted.set(zmq::sockopt::linger, 0);
  unlisted.set(zmq::sockopt::curve_serverkey, zmq::const_buffer(f.topology.node(1).public_key->data(), 32));
  unlisted.set(zmq::sockopt::curve_publickey, zmq::const_buffer(foreign.public_key.data(), 32));
  unlisted.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(foreign.secret_key.data(), 32));
  unlisted.connect(node1);
  EXPECT_FALSE(answered(unlisted, std::string(64, 'y'), 2000)) << "a client with an unlisted key was answered";
  unlisted.close();
  plain.close();

  // The real node 0, over CURVE with its listed key, completes the run.
  const pid_t p0 = spawn_node(f, 0);
  EXPECT_EQ(wait_exit(p0, 120), 0);
  EXPECT_EQ(wait_exit(p1, 120), 0);
  const NodeOutcome got = read_result(f.state_dir(1));
  EXPECT_EQ(got.status, "finished");
  EXPECT_EQ(got.contributors, (std::vector<long>{0, 1}));
  EXPECT_EQ(got.frames_rejected, 0) << "a byte from a refused client reached the node's parser";
  const std::string log = read_text(f.state_dir(1) / "node.log");
  EXPECT_NE(log.find("CurveZMQ: refused a connection from 127.0.0.1 (key " + foreign.hex() +
                     "): public key not in the topology"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find(read_text(fs::path(f.topology.key_dir_of(1)) / "node.key").substr(20, 64)), std::string::npos)
      << "the secret key must never reach a log";

  const CliRun sim = run_cli(f.simulate_args((dir / "report.json").string()));
  ASSERT_EQ(sim.code, 0) << sim.output;
  const auto expected = read_report(dir / "report.json");
  ASSERT_EQ(expected.size(), 2u);
  EXPECT_DOUBLE_EQ(got.accuracy, expected[1].accuracy);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace fednode::testing_network
