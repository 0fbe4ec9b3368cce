// LAN discovery's decisions (node/peer_finder.h) and its socket (node/beacon_socket.h): which
// beacons count, and how a forged one that points elsewhere gives way to the real peer.
#include "node/beacon_socket.h"
#include "node/peer_finder.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace fednode {
namespace {

using Clock = PeerFinder::Clock;
using std::chrono::milliseconds;

std::array<uint8_t, 32> key_of(int n) {
  std::array<uint8_t, 32> k{};
  k.fill(static_cast<uint8_t>(n + 1));
  return k;
}

RunTag run_tag(uint8_t v) {
  RunTag r;
  r.fill(v);
  return r;
}

HeardBeacon heard(const std::string& host, NodeId node, uint16_t port, std::array<uint8_t, 32> key,
                  RunTag run = run_tag(7)) {
  HeardBeacon h;
  h.host = host;
  h.beacon = Beacon{run, node, port, key};
  return h;
}

struct Finder {
  std::vector<std::string> lines;
  PeerFinder finder{{{0, key_of(0)}, {1, key_of(1)}, {2, key_of(2)}},
                    0,
                    {1},
                    run_tag(7),
                    [this](const std::string& l) { lines.push_back(l); },
                    [](NodeId id) { return "n" + std::to_string(id); },
                    PeerFinder::Timing{milliseconds(3000), milliseconds(5000)}};
  bool said(const std::string& part) const {
    for (const auto& l : lines)
      if (l.find(part) != std::string::npos) return true;
    return false;
  }
};

TEST(PeerFinder, NothingToDialUntilABeaconIsHeard) {
  Finder f;
  EXPECT_EQ(f.finder.address_for(1, false, Clock::now()), "");
  f.finder.hear(heard("10.0.0.2", 1, 7300, key_of(1)), Clock::now());
  EXPECT_EQ(f.finder.address_for(1, false, Clock::now()), "tcp://10.0.0.2:7300");
  EXPECT_TRUE(f.said("n1 may be at tcp://10.0.0.2:7300"));
}

TEST(PeerFinder, IgnoresBeaconsThatDoNotMatchTheTopologyAndSaysSoOncePerSender) {
  Finder f;
  const auto t = Clock::now();
  f.finder.hear(heard("10.0.0.9", 1, 7300, key_of(5)), t);  // n1 with another key
  f.finder.hear(heard("10.0.0.9", 1, 7301, key_of(5)), t);  // again: counted, not said again
  f.finder.hear(heard("10.0.0.9", 9, 7300, key_of(9)), t);  // no node 9
  f.finder.hear(heard("10.0.0.9", 1, 7300, key_of(1), run_tag(8)), t);  // another run
  HeardBeacon junk;
  junk.host = "10.0.0.9";
  junk.malformed = "no FNDB magic";
  f.finder.hear(junk, t);
  EXPECT_EQ(f.finder.address_for(1, false, t), "");  // none of them is a candidate
  EXPECT_EQ(f.finder.ignored().at("key not the node's"), 2);
  EXPECT_EQ(f.finder.ignored().at("node not in the topology"), 1);
  EXPECT_EQ(f.finder.ignored().at("another run"), 1);
  EXPECT_EQ(f.finder.ignored().at("not a beacon"), 1);
  EXPECT_EQ(f.lines.size(), 4u);
  EXPECT_TRUE(f.said("ignored a beacon from 10.0.0.9: it names n1 with a key that is not n1's"));
}

TEST(PeerFinder, OwnBeaconsAndPeersNotSoughtAreNoCandidates) {
  Finder f;
  const auto t = Clock::now();
  f.finder.hear(heard("10.0.0.1", 0, 7300, key_of(0)), t);  // this node's own
  f.finder.hear(heard("10.0.0.3", 2, 7300, key_of(2)), t);  // a node it does not dial
  EXPECT_EQ(f.finder.address_for(2, false, t), "");
  EXPECT_TRUE(f.lines.empty());
  EXPECT_TRUE(f.finder.ignored().empty());
}

TEST(PeerFinder, AForgedAddressGivesWayToTheRealOneWhichIsKept) {
  Finder f;
  auto t = Clock::now();
  // The forger is heard first, with n1's real (public) key but its own address.
  f.finder.hear(heard("10.0.0.66", 1, 9999, key_of(1)), t);
  f.finder.hear(heard("10.0.0.2", 1, 7300, key_of(1)), t + milliseconds(10));
  EXPECT_EQ(f.finder.address_for(1, false, t), "tcp://10.0.0.66:9999");
  // Its handshake never succeeds: within the trial the address is kept ...
  EXPECT_EQ(f.finder.address_for(1, false, t + milliseconds(2900)), "tcp://10.0.0.66:9999");
  // ... after it the other candidate is tried.
  t += milliseconds(3000);
  f.finder.hear(heard("10.0.0.66", 1, 9999, key_of(1)), t);
  f.finder.hear(heard("10.0.0.2", 1, 7300, key_of(1)), t);
  EXPECT_EQ(f.finder.address_for(1, false, t), "tcp://10.0.0.2:7300");
  EXPECT_TRUE(f.said("tcp://10.0.0.66:9999 has not proved n1's key for 3.0 s; trying tcp://10.0.0.2:7300"));
  // The real one passes the handshake and stays, however long the forger keeps beaconing.
  for (int i = 1; i <= 20; ++i) {
    t += milliseconds(1000);
    f.finder.hear(heard("10.0.0.66", 1, 9999, key_of(1)), t);
    EXPECT_EQ(f.finder.address_for(1, true, t), "tcp://10.0.0.2:7300");
  }
  EXPECT_TRUE(f.said("n1 at tcp://10.0.0.2:7300 proved its key"));
}

TEST(PeerFinder, APeerThatRestartsOnANewPortIsFollowed) {
  Finder f;
  auto t = Clock::now();
  f.finder.hear(heard("10.0.0.2", 1, 40001, key_of(1)), t);
  EXPECT_EQ(f.finder.address_for(1, true, t), "tcp://10.0.0.2:40001");
  // The connection broke; its beacons now name another port, the old one is no longer heard.
  t += milliseconds(1000);
  f.finder.hear(heard("10.0.0.2", 1, 40777, key_of(1)), t);
  EXPECT_EQ(f.finder.address_for(1, false, t), "tcp://10.0.0.2:40001");  // still within the trial
  t += milliseconds(3000);
  f.finder.hear(heard("10.0.0.2", 1, 40777, key_of(1)), t);
  EXPECT_EQ(f.finder.address_for(1, false, t), "tcp://10.0.0.2:40777");
}

TEST(PeerFinder, AFloodOfForgedAddressesHoldsAFewCandidates) {
  Finder f;
  auto t = Clock::now();
  f.finder.hear(heard("10.0.0.2", 1, 7300, key_of(1)), t);
  EXPECT_EQ(f.finder.address_for(1, false, t), "tcp://10.0.0.2:7300");
  for (uint16_t port = 1; port <= 5000; ++port) f.finder.hear(heard("10.0.0.66", 1, port, key_of(1)), t);
  // The one being dialled is never pushed out; a proven one is kept.
  EXPECT_EQ(f.finder.address_for(1, true, t + milliseconds(10000)), "tcp://10.0.0.2:7300");
}

// Broadcasts `bytes` `copies` times to every socket on `port` on loopback (a unicast datagram
// reaches only one of the sockets sharing the port).
void broadcast_on_loopback(uint16_t port, const std::string& bytes, int copies) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &on, sizeof on);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(0x7fffffff);  // 127.255.255.255
  for (int i = 0; i < copies; ++i)
    ASSERT_EQ(sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(bytes.size()));
  close(fd);
}

// The socket: beacons broadcast on loopback reach another socket on the same port, and a
// datagram that is not a beacon arrives marked as such.
TEST(BeaconSocket, HearsBeaconsOnLoopback) {
  BeaconSocketOptions options;
  options.port = 23993;
  options.interval = milliseconds(50);
  options.interfaces = {"lo"};
  Beacon a{run_tag(1), 1, 7301, key_of(1)}, b{run_tag(1), 2, 7302, key_of(2)};
  BeaconSocket first(a, options), second(b, options);
  EXPECT_EQ(first.destinations(), std::vector<std::string>{"127.255.255.255"});
  broadcast_on_loopback(options.port, "hello", 1);  // a stranger's datagram
  bool heard_b = false, heard_junk = false;
  for (int i = 0; i < 100 && !(heard_b && heard_junk); ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    for (const HeardBeacon& h : first.take_heard()) {
      EXPECT_EQ(h.host, "127.0.0.1");
      if (h.beacon && h.beacon->node == 2) {
        heard_b = true;
        EXPECT_EQ(h.beacon->port, 7302);
      }
      if (!h.beacon && h.malformed.find("52 bytes") != std::string::npos) heard_junk = true;
    }
  }
  EXPECT_TRUE(heard_b);
  EXPECT_TRUE(heard_junk);
}

// A node busy for seconds takes what was heard only then: a flood of copies of one datagram
// (20 000 of them, twenty times what is held) must not push out the peer's beacon heard before it.
TEST(BeaconSocket, AFloodOfCopiesKeepsThePeersBeacon) {
  BeaconSocketOptions options;
  options.port = 23992;
  options.interval = milliseconds(3600 * 1000);  // each socket's first beacon only
  options.interfaces = {"lo"};
  BeaconSocket first({run_tag(1), 1, 7301, key_of(1)}, options);
  BeaconSocket second({run_tag(1), 2, 7302, key_of(2)}, options);
  const std::string forged = encode_beacon(Beacon{run_tag(1), 2, 9999, key_of(2)});
  for (int burst = 0; burst < 100; ++burst) {
    broadcast_on_loopback(options.port, forged, 200);
    std::this_thread::sleep_for(milliseconds(1));  // the socket's buffer drains between bursts
  }
  std::this_thread::sleep_for(milliseconds(200));
  int peer = 0, copies = 0;
  for (const HeardBeacon& h : first.take_heard()) {
    ASSERT_TRUE(h.beacon);
    if (h.beacon->node == 2 && h.beacon->port == 7302) ++peer;
    if (h.beacon->port == 9999) ++copies;
  }
  EXPECT_EQ(peer, 1);
  EXPECT_EQ(copies, 1);
  EXPECT_EQ(first.dropped(), 0u);
}

}  // namespace
}  // namespace fednode
