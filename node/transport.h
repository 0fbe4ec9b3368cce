// How frames move between nodes: ZeroMQ, one ROUTER socket that every peer connects to, and one
// DEALER per peer this node sends to. Why this pattern (docs/node.md, "Transport"):
//  - a ROUTER accepts any number of peers on one port and tells the connections apart, so the
//    acknowledgement of a frame goes back on the very connection the frame came in on — the
//    sender need not be reachable from the receiver, and no second connection is opened for acks;
//  - a DEALER per peer is asynchronous (no lock-step of REQ/REP) and reconnects by itself when
//    its peer restarts; its send queue holds one frame (ZMQ_SNDHWM 1), so retries for a peer
//    that is down never pile up duplicate multi-megabyte frames. (Not ZMQ_IMMEDIATE: it makes
//    libzmq discard unread inbound frames of a connection that closes — a peer's last ack.)
//  - silence ends a connection (TransportOptions::silence_ms: TCP keepalive and TCP_USER_TIMEOUT,
//    not ZMTP heartbeats), and the DEALER reconnects.
// The transport moves opaque single-part frames; sealing, acks, retries and deadlines are the
// node's (node/link.h, node/node.h). ZMQ_MAXMSGSIZE bounds what a peer can make it allocate.
//
// Optionally every connection is CurveZMQ (docs/security.md, "Layer 2"): the ROUTER is a CURVE
// server, each DEALER a CURVE client that checks its peer's key, and a ZAP handler admits only
// the listed keys. The handler is a socket polled in receive() like the others, not a thread: a
// connection is admitted whenever the node next looks at its sockets.
#pragma once

#include "crypto/curve.h"
#include "core/types.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zmq {
class message_t;
}

namespace fednode {

// Answers (acks, receipts, errors) that may wait per peer for its DEALER's queue (Transport::reply).
constexpr size_t kMaxWaitingAnswers = 64;

struct CurveSettings {
  // This node's key pair; null: connections are plain TCP (the end-to-end sealing still applies).
  std::shared_ptr<const CurveKeyPair> keys;
  // The nodes whose keys may connect (the ZAP allow list), and the key each DEALER requires its
  // peer to prove. The node passes every node of its topology.
  std::map<NodeId, PublicKey> peers;
};

struct TransportOptions {
  uint64_t max_message_bytes = uint64_t{256} << 20;  // larger frames drop their connection
  // A connection whose peer acknowledges nothing for this long is dropped (and a DEALER dials
  // again): data sent and not acknowledged by the peer's TCP (TCP_USER_TIMEOUT, ZMQ_TCP_MAXRT),
  // or, while idle, keepalive probes unanswered. Silence, not the clock: a slow transfer that
  // moves is never cut. Not ZMTP heartbeats: libzmq 4.3.4 aborts (stream_engine_base.cpp:331,
  // zeromq/libzmq#4364) when a heartbeat timer fires on a connection that already failed, which
  // a 128-leaf star's hub hit under load. A Node sets this from [federation] silence_seconds.
  int silence_ms = 30000;
  int linger_ms = 2000;  // on close: how long unsent answers (a last ack) may still go out
  // Complete frames libzmq may queue per connection before it stops reading that connection
  // (TCP then holds the sender back; nothing is lost). A peer has at most one unacknowledged
  // frame in flight (stop-and-wait), so a few suffice; libzmq's default of 1000 let one
  // connection queue up to 1000 frames of max_message_bytes while the node was busy merging.
  int receive_queue = 8;
  // A Node sets this from its topology's [federation] hop_encryption, whatever it held.
  CurveSettings curve;
  // Connection events worth a log line (CURVE clients refused); never a key's secret half.
  std::function<void(const std::string&)> log;
  // This node accepts no connections (reachable = false, docs/deployment.md): the ROUTER binds
  // nothing, and every peer it dials is dialled at once, on a connection named by its circuit
  // (node/circuit.h), on which that peer sends to it as well as answering.
  bool dial_only = false;
  // A relay whose connection has not been up for this long is given up for the peer's next one.
  int relay_failover_ms = 10000;
};

// A relay a peer can be met at.
struct RelayPoint {
  std::string name;                    // for messages
  std::string address;                 // tcp://HOST:PORT
  std::optional<PublicKey> key;        // under CurveZMQ: the key the relay must prove
  bool operator==(const RelayPoint& o) const { return name == o.name && address == o.address && key == o.key; }
};

// How a peer is reached (topology/reach.h decides from the file).
struct PeerRoute {
  enum class Kind {
    Dial,    // a DEALER to `address` (empty: not known yet, discovery)
    Answer,  // the peer dials this node: frames go out on the ROUTER's connection of its circuit
    Relay,   // a DEALER to a relay of `relays`, on the circuit (this node, peer)
  };
  Kind kind = Kind::Dial;
  std::string address;
  // In order of preference: the first, and the next once the one in use has been unreachable for
  // TransportOptions::relay_failover_ms (the far end, finding it unreachable too, moves the same way).
  std::vector<RelayPoint> relays;
  bool operator==(const PeerRoute& o) const { return kind == o.kind && address == o.address && relays == o.relays; }
};

// A frame as ZeroMQ received it, left in ZeroMQ's buffer: a multi-megabyte message is not
// copied on its way to the node, which opens (decrypts) it where it lies. Move-only.
class ReceivedFrame {
 public:
  ReceivedFrame();
  explicit ReceivedFrame(zmq::message_t&& message);
  ReceivedFrame(ReceivedFrame&&) noexcept;
  ReceivedFrame& operator=(ReceivedFrame&&) noexcept;
  ~ReceivedFrame();

  char* data() { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {data_, size_}; }

 private:
  std::unique_ptr<zmq::message_t> message_;
  char* data_ = nullptr;
  size_t size_ = 0;
};

// A message that goes out as several transport messages (a version-2 stream, node/secure_stream.h),
// taken one at a time as the peer's queue has room: producing the next ones (sealing chunks)
// overlaps sending the last, and nothing holds the whole message's ciphertext at once.
class OutgoingMessages {
 public:
  virtual ~OutgoingMessages() = default;
  virtual size_t count() const = 0;
  virtual size_t size(size_t i) const = 0;
  // Message i, exactly size(i) bytes, handed to ZeroMQ without a copy; called once for each i, in
  // order. An exception ends the stream (nothing more of it is sent) and propagates from the
  // Transport call that was handing it over.
  virtual std::string take(size_t i) = 0;
};

// The connection a frame came in on, where its answers go; kept beyond the frame by whoever
// answers later (a paced hello's ack, a receipt the peer's queue did not take).
struct ReplyPath {
  std::string route;                 // ROUTER routing id; empty when it came in on a DEALER
  std::optional<NodeId> via_dealer;  // the peer whose DEALER it came in on (acks, errors)
  bool operator==(const ReplyPath& o) const { return route == o.route && via_dealer == o.via_dealer; }
  bool operator!=(const ReplyPath& o) const { return !(*this == o); }
};

// A frame that arrived, and the connection to answer on.
struct Incoming : ReplyPath {
  ReceivedFrame frame;
};

class Transport {
 public:
  // Binds the ROUTER to `bind_address` (tcp://HOST:PORT, HOST may be *; nothing when
  // options.dial_only). Throws InputError naming the address when it cannot be bound (in use, bad
  // host), or when CURVE is asked for and cannot be set up.
  Transport(NodeId self, const std::string& bind_address, TransportOptions options = {});
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Where peers reach `peer`; the DEALER connects on first use. An empty address: not known yet
  // (discovery, node/peer_finder.h) — sends to it are not taken until it is. A new address closes
  // the connection to the old one, which counts as a break (breaks()).
  void add_peer(NodeId peer, const std::string& address);
  // The same for any way of reaching it; a new way counts as a break, as a new address does.
  void add_peer(NodeId peer, const PeerRoute& route);
  // Why the host of a tcp:// address does not resolve now (empty if it does, or is an IP
  // address): libzmq keeps retrying such a peer in silence, so the node says it once.
  static std::string resolution_problem(const std::string& address);
  // The libzmq this process runs with, "4.3.4" (fednode --version).
  static std::string zeromq_version();

  // Hands the frame to ZeroMQ without blocking. False when the queue for `peer` is full (a
  // frame for it is still waiting, e.g. while it is down; the caller retries later);
  // InputError for a peer never added.
  bool send(NodeId peer, const std::string& frame);
  // Starts handing `messages` to `peer`'s queue; what the queue does not take now goes out from
  // pump() (which receive() calls). False, taking nothing, while an earlier stream for `peer` is
  // still being handed over; a frame sent then is refused likewise, so nothing overtakes a stream.
  bool send(NodeId peer, std::unique_ptr<OutgoingMessages>& messages);
  // Whether a stream for `peer` is still being handed over.
  bool sending(NodeId peer) const;
  // Hands the queues what they take now from the streams being sent.
  void pump();
  // Drops whatever is still queued for `peer` (its socket is closed; the next send opens a new
  // one, which also connects at once instead of after libzmq's reconnect backoff). For a frame
  // the caller no longer wants delivered: a stale one would otherwise go out ahead of the next.
  void drop_queued(NodeId peer);
  // How many times a connection to `peer` broke after it was made (a peer that restarted, a
  // heartbeat that timed out). A frame handed over before a break may never have arrived, and
  // its acknowledgement may be lost; on a connection that did not break, neither happens
  // (TCP delivers, and libzmq drops nothing on a live connection of these sockets).
  uint64_t breaks(NodeId peer) const;
  // Whether the current connection to `peer` completed its handshake: under CurveZMQ, proof that
  // the other end holds the secret half of the key this node expects for `peer`. Updated by
  // receive(); false again once that connection breaks.
  bool handshaken(NodeId peer) const;
  // The TCP port the listening socket is bound to: the one a bind address gave, or the one the
  // system chose for "tcp://*:*". 0 when it cannot be told.
  uint16_t bound_port() const;
  // When data last moved to `peer`: its TCP acknowledged more bytes on the current connection
  // (node/tcp_progress.h), or a connection to it was made. The epoch if neither happened yet.
  // Sampled when asked: a caller asks as often as it needs the answer to be fresh.
  std::chrono::steady_clock::time_point last_progress(NodeId peer);
  // When data last arrived on a connection a peer made to this node's ROUTER (its TCP received
  // more bytes, or a frame or a new connection came): a transfer moving towards this node, from
  // any peer. Sampled when asked, as last_progress.
  std::chrono::steady_clock::time_point last_inbound_progress();
  // Answers on the connection `in` arrived on, also between the chunks of a stream being sent
  // there. False when that connection is gone, or its queue has no room now (nothing waits). On
  // a DEALER an answer the one-frame queue has no room for waits in the transport (up to
  // kMaxWaitingAnswers a peer) and goes first when there is: true.
  bool reply(const ReplyPath& in, const std::string& frame);
  // Whether answers still wait for room in a DEALER's queue (a node closes only once they left).
  bool answers_waiting() const;

  // Waits up to `timeout` for one frame from any socket, answering CURVE admission (ZAP)
  // requests meanwhile; returns early, with nothing, when a connection to a peer broke.
  std::optional<Incoming> receive(std::chrono::milliseconds timeout);

  // CURVE clients the ZAP handler has refused so far.
  int64_t curve_refusals() const;

  const std::string& bind_address() const { return bind_address_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string bind_address_;
};

}  // namespace fednode
