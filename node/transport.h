// How frames move between nodes: ZeroMQ, one ROUTER socket that every peer connects to, and one
// DEALER per peer this node sends to. Why this pattern (docs/protocol.md, "Transport"):
//  - a ROUTER accepts any number of peers on one port and tells the connections apart, so the
//    acknowledgement of a frame goes back on the very connection the frame came in on — the
//    sender need not be reachable from the receiver, and no second connection is opened for acks;
//  - a DEALER per peer is asynchronous (no lock-step of REQ/REP) and reconnects by itself when
//    its peer restarts; its send queue holds one frame (ZMQ_SNDHWM 1), so retries for a peer
//    that is down never pile up duplicate multi-megabyte frames. (Not ZMQ_IMMEDIATE: it makes
//    libzmq discard unread inbound frames of a connection that closes — a peer's last ack.)
//  - ZMTP heartbeats (ZMQ_HEARTBEAT_*) detect a dead TCP connection and make the DEALER reconnect.
// The transport moves opaque single-part frames; sealing, acks, retries and deadlines are the
// node's (node/link.h, node/node.h). ZMQ_MAXMSGSIZE bounds what a peer can make it allocate.
#pragma once

#include "methods/types.h"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace fednode {

struct TransportOptions {
  uint64_t max_message_bytes = uint64_t{256} << 20;  // larger frames drop their connection
  int heartbeat_ivl_ms = 1000;
  int heartbeat_timeout_ms = 10000;
  int linger_ms = 2000;  // on close: how long unsent frames (a last ack) may still go out
};

// A frame that arrived, and the connection to answer on.
struct Incoming {
  std::string frame;
  std::string route;                 // ROUTER routing id; empty when it came in on a DEALER
  std::optional<NodeId> via_dealer;  // the peer whose DEALER it came in on (acks, errors)
};

class Transport {
 public:
  // Binds the ROUTER to `bind_address` (tcp://HOST:PORT, HOST may be *). Throws InputError
  // naming the address when it cannot be bound (in use, bad host).
  Transport(NodeId self, const std::string& bind_address, TransportOptions options = {});
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Where peers reach `peer`; the DEALER connects on first use.
  void add_peer(NodeId peer, const std::string& address);

  // Hands the frame to ZeroMQ without blocking. False when the queue for `peer` is full (a
  // frame for it is still waiting, e.g. while it is down; the caller retries later);
  // InputError for a peer never added.
  bool send(NodeId peer, const std::string& frame);
  // Answers on the connection `in` arrived on. False when that connection is gone.
  bool reply(const Incoming& in, const std::string& frame);

  // Waits up to `timeout` for one frame from any socket.
  std::optional<Incoming> receive(std::chrono::milliseconds timeout);

  const std::string& bind_address() const { return bind_address_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string bind_address_;
};

}  // namespace fednode
