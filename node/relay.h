// A relay (`fednode relay`, docs/deployment.md "Relays"): joins two nodes that cannot reach each
// other. Both dial it; each names its connection by the circuit (self, peer) (node/circuit.h), and
// the relay hands every frame that comes in on circuit (a, b) to the connection of circuit (b, a).
// It holds no key that opens a frame: frames stay sealed to their recipient, whose replay window
// and acknowledgements are end to end, so a relay can delay or drop, never forge or alter
// unnoticed. Under CurveZMQ it admits only the topology's keys and carries a frame only when the
// key that made its connection is the circuit's first node.
//
// Memory is bounded: a frame whose recipient is absent or slow waits, at most max_circuit_bytes
// per circuit and max_held_bytes in all. Past the first for an absent recipient the circuit's
// frames are dropped and, once the recipient is back, its sender is told (RelayNote::PeerLeft)
// and sends again; past the second the relay stops reading until the queues drain.
#pragma once

#include "crypto/curve.h"
#include "core/types.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace fednode {

struct RelayOptions {
  std::string bind;                            // tcp://HOST:PORT (HOST may be *)
  std::shared_ptr<const CurveKeyPair> keys;    // null: plain TCP
  std::map<NodeId, PublicKey> allowed;         // under CURVE: who may connect, by node
  // The federation's nodes: a circuit naming any other is refused, so that nobody can make the
  // relay keep state for made-up circuits. Empty: any.
  std::set<NodeId> nodes;
  uint64_t max_message_bytes = uint64_t{256} << 20;
  uint64_t max_circuit_bytes = uint64_t{64} << 20;
  uint64_t max_held_bytes = uint64_t{1} << 30;
  int silence_ms = 30000;  // as TransportOptions::silence_ms
  std::function<void(const std::string&)> log;
};

struct RelayCounters {
  uint64_t frames = 0;           // carried to their recipient's connection
  uint64_t bytes = 0;
  uint64_t refused = 0;          // not carried: no circuit name, one of a node not in the federation or not
                                 // the sender's key's, multi-part
  uint64_t dropped = 0;          // held for an absent recipient past the circuit's bound
  uint64_t peer_left_notes = 0;  // senders told that frames may be lost
  uint64_t held_bytes = 0;       // now
  uint64_t circuits = 0;         // that carried something
};

class Relay {
 public:
  // Bound and admitting when it returns; NetworkError naming the address when it cannot bind.
  explicit Relay(RelayOptions options);
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Carries frames for up to `wait`.
  void step(std::chrono::milliseconds wait);
  // Steps until `stop` is set.
  void run(const std::atomic<bool>& stop);
  RelayCounters counters() const;
  uint16_t bound_port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The counters in Prometheus's text format, labelled with the relay's name.
std::string relay_metrics(const std::string& name, const RelayCounters& c);

}  // namespace fednode
