// LAN discovery, the socket half (docs/lan.md, "Discovery"): a UDP socket that broadcasts this
// node's beacon (protocol/beacon.h) about once a second on every IPv4 interface that is up, as
// ZRE's zbeacon does, and collects the beacons it hears. A background thread does both, so that
// a node stays visible while it merges or fits for minutes. What the beacons say is only stored
// here; node/peer_finder.h decides what, if anything, a beacon is worth.
#pragma once

#include "protocol/beacon.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fednode {

struct BeaconSocketOptions {
  uint16_t port = 0;  // UDP, the same at every node (the topology's discovery_port)
  std::chrono::milliseconds interval{1000};
  // Interfaces to beacon on, by name ("eth0", "lo"); empty: every IPv4 interface that is up,
  // loopback included (nodes on one machine find each other there).
  std::vector<std::string> interfaces;
};

struct HeardBeacon {
  std::string host;              // the datagram's IPv4 source address, dotted
  std::optional<Beacon> beacon;  // nullopt: not a beacon (see malformed)
  std::string malformed;         // why it is not one
};

class BeaconSocket {
 public:
  // Binds the UDP port (shared with the other nodes on this machine, SO_REUSEADDR) and starts
  // beaconing `own`; returns once the socket is bound. Throws NetworkError naming the port.
  BeaconSocket(const Beacon& own, BeaconSocketOptions options);
  ~BeaconSocket();  // stops the thread; no beacon goes out after it returns
  BeaconSocket(const BeaconSocket&) = delete;
  BeaconSocket& operator=(const BeaconSocket&) = delete;

  // The datagrams heard since the last call, oldest first, each distinct one (sender and bytes)
  // once: a flood of copies, forged or not, cannot push a peer's beacon out while the node is busy
  // for seconds. At most kMaxHeld distinct ones are kept between two calls (the newest); the rest
  // are counted in dropped(). A node calls this every step.
  std::vector<HeardBeacon> take_heard();
  uint64_t dropped() const { return dropped_.load(); }
  // The broadcast addresses the last beacon went to ("10.0.0.255", "127.255.255.255").
  std::vector<std::string> destinations() const;

  static constexpr size_t kMaxHeld = 1024;

 private:
  void loop();
  void send_beacon();
  void receive_all();

  const std::string own_;
  const BeaconSocketOptions options_;
  int fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: the destructor's write ends the thread's poll at once
  mutable std::mutex mutex_;
  std::deque<std::pair<std::string, HeardBeacon>> heard_;  // each with its sender and bytes, the key below
  std::set<std::string> heard_keys_;
  std::vector<std::string> destinations_;
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace fednode
