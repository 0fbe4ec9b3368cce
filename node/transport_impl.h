// The transport's sockets and what it knows of each peer (node/transport.h is the public face).
// Not installed: only node/transport*.cpp include it.
#pragma once

#include "node/curve_gate.h"
#include "node/tcp_progress.h"
#include "node/transport.h"

#include <zmq.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

struct Transport::Impl {
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  struct Peer {
    PeerRoute route;
    std::unique_ptr<zmq::socket_t> dealer;   // Dial and Relay: connected on first send, or at once (eager)
    std::unique_ptr<zmq::socket_t> monitor;  // the dealer's CONNECTED and DISCONNECTED events (zmq_socket_monitor)
    uint64_t breaks = 0;
    bool handshaken = false;  // the current connection completed its ZMTP (and CURVE) handshake
    std::optional<TcpProgress> connection;  // the current one, once the monitor named it
    uint64_t acked_seen = 0;
    std::chrono::steady_clock::time_point last_progress{};
    // A stream being handed over, and its next message, written before the queue had room for
    // it: sealed while the one before it was still being sent.
    std::unique_ptr<OutgoingMessages> stream;
    size_t stream_next = 0;
    std::optional<zmq::message_t> stream_ready;
    // Answers (acks, receipts, errors) its DEALER's one-frame queue had no room for: they go out
    // ahead of the stream's next chunk. A node that dials carries its acks on that DEALER.
    std::deque<zmq::message_t> answers;
    size_t relay_at = 0;  // Relay: which of route.relays is in use
    int answer_fd = -1;   // Answer: the descriptor of its connection, once a frame came on it
    std::chrono::steady_clock::time_point relay_down_since{};  // since when its connection is not up
  };
  std::map<NodeId, Peer> peers;
  NodeId self = 0;
  TransportOptions options;
  std::unique_ptr<CurveGate> zap;  // CURVE only: who may connect
  size_t next_socket = 0;  // where receive() looks first: round robin, so that no socket starves
  // The ROUTER's ACCEPTED and DISCONNECTED events, and the connections peers made to it.
  std::unique_ptr<zmq::socket_t> router_monitor;
  struct Inbound {
    int fd = -1;
    TcpProgress connection;
    uint64_t received_seen = 0;
    uint64_t acked_seen = 0;
  };
  std::vector<Inbound> inbound;
  std::chrono::steady_clock::time_point last_inbound{}, last_answer_progress{}, answer_sampled{};
  uint64_t monitors_made = 0;  // names each monitor's inproc endpoint
  // A stream to a peer reached by answering could not be handed over whole: the ROUTER has no
  // POLLOUT per connection, so receive() polls briefly until it is.
  bool answer_backlog = false;

  // Whether `p`'s socket is open even before anything is sent to it: a peer that is to answer on
  // the connection this node dials (this node is dial-only), or a relay's circuit, which the far
  // end must find there.
  bool eager(const Peer& p) const {
    return p.route.kind == PeerRoute::Kind::Relay || (options.dial_only && p.route.kind == PeerRoute::Kind::Dial);
  }
  // Hands `m` to the connection `p` is reached on, without blocking: its DEALER, or for a peer
  // that dialled this node, the ROUTER's connection of its circuit. False when there is no room
  // now or no connection; the message is then left as it was.
  bool offer(NodeId id, Peer& p, zmq::message_t& m);
  // Hands `p`'s queue what it takes now of its waiting answers and of the stream being sent; true
  // while some is left.
  bool pump(NodeId id, Peer& p);
  // `peer`'s DEALER, connected on first use; null while its address is not known yet (discovery
  // has not found it) or for a peer reached by answering.
  zmq::socket_t* dealer(NodeId peer);
  std::unique_ptr<zmq::socket_t> open_dealer(NodeId peer, Peer& p);
  // The ROUTER's monitor events: a connection a peer made (its descriptor, to watch the bytes
  // that arrive on it) or one that closed. True when that was a break for a peer reached by
  // answering.
  bool note_router_events();

  // The sockets one receive() polls, in this order: the ROUTER and every DEALER (the data
  // sockets), the DEALERs' monitors, the ROUTER's monitor, and the ZAP socket with CURVE.
  struct PollSet {
    std::vector<zmq::pollitem_t> items;
    std::vector<NodeId> owners;  // the DEALER at data item k + 1 is owners[k]'s
    size_t data_items = 0;
    std::vector<Peer*> monitored;  // the monitor at item data_items + k is monitored[k]'s
    size_t router_monitor = 0;
  };
  PollSet poll_set();
  // A DEALER's monitor events: its connection made (the descriptor, to watch the bytes acked on
  // it), handshaken, or broken. True when a connection broke.
  static bool take_monitor_events(Peer& peer);
  // A frame from a data socket the poll found readable, starting where the last frame came from,
  // one past it: a flood on the ROUTER must not keep the acknowledgements that come in on the
  // DEALERs waiting. Sets `broke` when a relay said a circuit's far end left.
  std::optional<Incoming> take_frame(const PollSet& set, bool& broke);
  // Moves a relayed peer whose relay has been unreachable too long on to its next relay.
  void fail_over(NodeId id, Peer& p, std::chrono::steady_clock::time_point now);
  // A relay's note on `p`'s circuit (node/circuit.h); true when the far end left.
  bool take_relay_note(Peer& p, const std::vector<zmq::message_t>& parts);
  // A connection of the ROUTER closed: a break for the peer reached by answering whose connection
  // it was, and for each whose connection is not known yet (the monitor names descriptors, not
  // circuits; a frame from the peer names its descriptor). True when any was counted.
  bool count_answer_break(int fd);
  // A frame came on the ROUTER's connection `route`: where that peer is answered, if it is one.
  void note_answer_connection(const std::string& route, const zmq::message_t& frame);
};

}  // namespace fednode
