// LAN discovery on a real launch (docs/lan.md, "Discovery"): a chain whose file gives no node an
// address, run by `fednode launch --discover` (every node `fednode run --discover` on loopback),
// while a forger broadcasts beacons on the same port: beacons naming each node with its real
// public key but pointing at a listener that accepts and never answers, beacons with keys that
// are not in the topology, beacons of nodes that do not exist, and datagrams that are not beacons.
// The run must finish with the simulator's results; the forged addresses are dialled but never
// trusted, the foreign keys never even dialled. (The 5-node chain across network namespaces,
// scripts/netns_chain_test.sh --discover, is the same on a real bridge.)
#include "federation.h"

#include "crypto/run_id.h"
#include "protocol/beacon.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace fednode::testing_network {
namespace {

constexpr int kDiscoveryPort = 23995;

// A TCP port that accepts connections and never says a word: where the forged beacons point. A
// CurveZMQ client that dials it waits for a greeting that never comes.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t size = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &size);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 50) > 0) {
          const int c = accept(fd_, nullptr, nullptr);
          if (c >= 0) {
            held_.push_back(c);
            ++accepted_;
          }
        }
      }
    });
  }
  ~SilentListener() {
    stop_ = true;
    thread_.join();
    for (int c : held_) close(c);
    close(fd_);
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::vector<int> held_;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Broadcasts the forged datagrams on loopback every 2 ms, from before the nodes start. A node
// dials the first candidate it heard, and a peer sends its first beacon the moment its socket
// opens, so a peer that opens just after the node's socket is heard first; with forgeries every
// 20 ms that happened to every search in one CI run (nothing dialled the silent listener), every
// 2 ms leaves a window ten times narrower. The cost is some 4 000 datagrams a second per node.
class Forger {
 public:
  Forger(const Topology& topology, uint16_t silent_port) {
    const RunTag run = beacon_run_tag(derive_run_id(run_name(topology)));
    for (const auto& n : topology.nodes) {
      datagrams_.push_back(encode_beacon(Beacon{run, n.id, silent_port, *n.public_key}));  // real key, wrong address
      std::array<uint8_t, 32> foreign = *n.public_key;
      foreign[0] ^= 0x5a;
      datagrams_.push_back(encode_beacon(Beacon{run, n.id, silent_port, foreign}));  // not its key
    }
    datagrams_.push_back(encode_beacon(Beacon{run, 77, silent_port, {}}));  // no node 77
    datagrams_.push_back("not a beacon at all");
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    const int on = 1;
    setsockopt(fd_, SOL_SOCKET, SO_BROADCAST, &on, sizeof on);
    thread_ = std::thread([this] {
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(kDiscoveryPort);
      to.sin_addr.s_addr = htonl(0x7fffffff);  // 127.255.255.255: every socket on the port hears it
      while (!stop_) {
        for (const auto& d : datagrams_)
          if (sendto(fd_, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to) > 0) ++sent_;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  ~Forger() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int sent() const { return sent_; }

 private:
  std::vector<std::string> datagrams_;
  int fd_ = -1;
  std::atomic<int> sent_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(Discovery, AChainWithoutAddressesFindsItselfPastForgedBeacons) {
  Federation f = make_federation(test_dir("discovery"), TopologyMode::Linear, 3, "fedcgs", 23996, {},
                                 {{"dataset", "fashion-mnist"}, {"train-limit", "900"}, {"test-limit", "200"}});
  for (auto& n : f.topology.nodes) n.address.clear();
  f.topology.federation.discovery_port = kDiscoveryPort;
  save_again(f);
  ASSERT_EQ(read_text(f.file).find("address"), std::string::npos);

  SilentListener silent;
  CliRun out;
  int forged = 0;
  {
    Forger forger(f.topology, silent.port());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    out = run_cli("launch " + f.file.string() + " --discover --quiet --timeout 120");
    forged = forger.sent();
  }
  ASSERT_EQ(out.code, 0) << out.output;
  EXPECT_GT(forged, 0);
  expect_every_node_equals_simulate(f);

  const std::string silent_address = "tcp://127.0.0.1:" + std::to_string(silent.port());
  int ignored_keys = 0, gave_up_forgeries = 0;
  for (NodeId id : f.topology.ids()) {
    const std::string log = read_text(f.state_dir(id) / "node.log");
    EXPECT_NE(log.find("hops: CurveZMQ"), std::string::npos) << log;  // no address: a network, so CURVE
    if (log.find("ignored a beacon from 127.0.0.1: it names") != std::string::npos) ++ignored_keys;
    EXPECT_NE(log.find("ignored a beacon from 127.0.0.1: node 77 is not in the topology"), std::string::npos) << log;
    EXPECT_NE(log.find("not a fednode beacon"), std::string::npos) << log;
    if (log.find(silent_address + " has not proved") != std::string::npos) ++gave_up_forgeries;
    // Never trusted: no handshake with the silent listener can succeed.
    EXPECT_EQ(log.find(silent_address + " proved"), std::string::npos) << log;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);)
      if (line.find("proved its key") != std::string::npos) EXPECT_EQ(line.find(silent_address), std::string::npos) << line;
  }
  EXPECT_EQ(ignored_keys, 3);
  // Forged beacons were heard first (every 2 ms from before the start, against a peer's one a
  // second), so the forged address was dialled and given up on at least once.
  EXPECT_GT(silent.accepted(), 0);
  EXPECT_GT(gave_up_forgeries, 0);
  if (!::testing::Test::HasFailure()) fs::remove_all(f.dir);
}

// Without --discover, a peer with no address is a clear error, not a silent wait; and discovery
// refuses plain hops, since a beacon is believed only through the CurveZMQ handshake.
TEST(Discovery, SaysWhatIsMissingInsteadOfWaiting) {
  Federation f = make_federation(test_dir("discovery"), TopologyMode::Linear, 2, "fedcgs", 23997, {},
                                 {{"dataset", "fashion-mnist"}, {"train-limit", "200"}, {"test-limit", "50"}});
  f.topology.nodes[0].address.clear();
  save_again(f);
  CliRun out = run_cli("run --topology " + f.file.string() + " --id 1 --quiet");
  EXPECT_EQ(out.code, 1) << out.output;
  EXPECT_NE(out.output.find("node 0 (n0) has no address in " + f.file.string() +
                            ": give it address = \"tcp://HOST:PORT\", or run with --discover"),
            std::string::npos)
      << out.output;
  f.topology.federation.hop_encryption = HopEncryption::None;
  save_again(f);
  out = run_cli("run --topology " + f.file.string() + " --id 1 --quiet --discover");
  EXPECT_EQ(out.code, 1) << out.output;
  EXPECT_NE(out.output.find("discovery needs CurveZMQ hops"), std::string::npos) << out.output;
  out = run_cli("run --topology " + f.file.string() + " --id 1 --quiet --discover-on lo");
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("--discover-on is for --discover"), std::string::npos) << out.output;
  if (!::testing::Test::HasFailure()) fs::remove_all(f.dir);
}

}  // namespace
}  // namespace fednode::testing_network
