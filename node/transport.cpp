#include "node/transport.h"

#include "node/curve_gate.h"
#include "node/socket_options.h"
#include "node/tcp_progress.h"


#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

namespace fednode {

struct Transport::Impl {
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  struct Peer {
    std::string address;
    std::unique_ptr<zmq::socket_t> dealer;   // connected on first send
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
  };
  std::map<NodeId, Peer> peers;
  TransportOptions options;
  std::unique_ptr<CurveGate> zap;  // CURVE only: who may connect
  size_t next_socket = 0;  // where receive() looks first: round robin, so that no socket starves
  // The ROUTER's ACCEPTED and DISCONNECTED events, and the connections peers made to it.
  std::unique_ptr<zmq::socket_t> router_monitor;
  struct Inbound {
    int fd = -1;
    TcpProgress connection;
    uint64_t received_seen = 0;
  };
  std::vector<Inbound> inbound;
  std::chrono::steady_clock::time_point last_inbound{};
  uint64_t monitors_made = 0;  // names each monitor's inproc endpoint

  // Hands `p`'s queue what it takes now of the stream being sent; true while some is left.
  bool pump(Peer& p) {
    if (!p.dealer) {  // its socket was closed: a new address, or dropped
      p.stream.reset();
      p.stream_ready.reset();
    }
    while (p.stream) {
      if (!p.stream_ready) {
        if (p.stream_next == p.stream->count()) {
          p.stream.reset();
          break;
        }
        std::string bytes;
        try {
          bytes = p.stream->take(p.stream_next++);
        } catch (...) {
          p.stream.reset();  // the rest cannot be written; the peer drops what it has of it
          p.stream_ready.reset();
          throw;
        }
        // Handed over as it is: ZeroMQ's I/O thread frees the string once it is on the wire.
        auto* owned = new std::string(std::move(bytes));
        p.stream_ready.emplace(owned->data(), owned->size(),
                               [](void*, void* hint) { delete static_cast<std::string*>(hint); }, owned);
      }
      if (!p.dealer->send(*p.stream_ready, zmq::send_flags::dontwait)) return true;
      p.stream_ready.reset();
    }
    return false;
  }

  // Null while the peer's address is not known yet (discovery has not found it).
  zmq::socket_t* dealer(NodeId peer) {
    auto it = peers.find(peer);
    if (it == peers.end()) throw InputError("transport: no address for node " + std::to_string(peer));
    if (it->second.address.empty()) return nullptr;
    if (!it->second.dealer) {
      std::unique_ptr<zmq::socket_t> s;
      try {
        s = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
      } catch (const zmq::error_t& e) {
        if (e.num() != EMFILE && e.num() != ENFILE) throw;
        // Each peer's socket takes file descriptors (its mailbox, its connection): a hub of a
        // few hundred leaves can reach the usual limit of 1024.
        throw InputError("cannot open a socket for node " + std::to_string(peer) + ": " + e.what() + " (" +
                         std::to_string(peers.size()) + " peers, about 3 file descriptors each; raise the " +
                         "limit on open files, e.g. ulimit -n)");
      }
      apply_socket_options(*s, options);
      // No ZMQ_IMMEDIATE: with it, libzmq discards what a peer sent on a connection that then
      // closes before this node read it (a leaf's last ack, as it exits), which left a 32-node
      // star's hub waiting for acknowledgements already sent. Without it a frame for a peer that
      // is down waits in the queue; a high-water mark of 1 keeps resends from stacking copies
      // of a large frame there (a resend finds the queue full and is simply tried again later).
      s->set(zmq::sockopt::sndhwm, 1);
      // A peer's socket carries only the outbox's frames, each on disk until acknowledged: one
      // still queued when the node closes is an offer nobody took, a resend of a frame already
      // acknowledged, or one the peer never answered. None is worth keeping the process for
      // (answers go out through the listening socket, which keeps linger_ms).
      s->set(zmq::sockopt::linger, 0);
      if (options.curve.keys) options.curve.keys->make_client(s->handle(), options.curve.peers.at(peer));
      // Before connecting: a connection that breaks at once is counted too.
      const std::string endpoint = "inproc://fednode-monitor-" + std::to_string(peer) + "-" +
                                   std::to_string(++monitors_made);
      if (zmq_socket_monitor(s->handle(), endpoint.c_str(),
                             ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0)
        throw zmq::error_t();
      auto monitor = std::make_unique<zmq::socket_t>(context, zmq::socket_type::pair);
      monitor->set(zmq::sockopt::linger, 0);
      monitor->connect(endpoint);
      it->second.monitor = std::move(monitor);
      try {
        s->connect(it->second.address);
      } catch (const zmq::error_t& e) {
        throw InputError("cannot connect to node " + std::to_string(peer) + " at '" + it->second.address +
                         "': " + e.what());
      }
      it->second.dealer = std::move(s);
      it->second.handshaken = false;
    }
    return it->second.dealer.get();
  }

  // The ROUTER's monitor events: a connection a peer made (its descriptor, to watch the bytes that
  // arrive on it) or one that closed.
  void note_router_events() {
    while (const auto e = next_monitor_event(*router_monitor)) {
      if (!e->complete) continue;
      const uint16_t event = e->event;
      const int fd = static_cast<int>(e->value);
      inbound.erase(std::remove_if(inbound.begin(), inbound.end(), [&](const Inbound& c) { return c.fd == fd; }),
                    inbound.end());
      if (event == ZMQ_EVENT_ACCEPTED) {
        Inbound c{fd, TcpProgress(fd), 0};
        c.received_seen = c.connection.bytes_received().value_or(0);
        inbound.push_back(std::move(c));
        last_inbound = std::chrono::steady_clock::now();
      }
    }
  }

  // The sockets one receive() polls, in this order: the ROUTER and every DEALER (the data
  // sockets), the DEALERs' monitors, the ROUTER's monitor, and the ZAP socket with CURVE.
  struct PollSet {
    std::vector<zmq::pollitem_t> items;
    std::vector<NodeId> owners;  // the DEALER at data item k + 1 is owners[k]'s
    size_t data_items = 0;
    std::vector<Peer*> monitored;  // the monitor at item data_items + k is monitored[k]'s
    size_t router_monitor = 0;
  };
  PollSet poll_set() {
    PollSet set;
    set.items.push_back({router.handle(), 0, ZMQ_POLLIN, 0});
    for (auto& [id, p] : peers)
      if (p.dealer) {
        // A stream the queue has not taken all of wakes the poll when the queue has room again.
        const short events = p.stream && pump(p) ? ZMQ_POLLIN | ZMQ_POLLOUT : ZMQ_POLLIN;
        set.items.push_back({p.dealer->handle(), 0, events, 0});
        set.owners.push_back(id);
      }
    set.data_items = set.items.size();
    for (auto& [id, p] : peers)
      if (p.monitor) {
        set.items.push_back({p.monitor->handle(), 0, ZMQ_POLLIN, 0});
        set.monitored.push_back(&p);
      }
    set.router_monitor = set.items.size();
    set.items.push_back({router_monitor->handle(), 0, ZMQ_POLLIN, 0});
    if (zap) set.items.push_back({zap->socket().handle(), 0, ZMQ_POLLIN, 0});
    return set;
  }

  // A DEALER's monitor events: its connection made (the descriptor, to watch the bytes acked on
  // it), handshaken, or broken. True when a connection broke.
  static bool take_monitor_events(Peer& peer) {
    bool broke = false;
    while (const auto e = next_monitor_event(*peer.monitor)) {
      const uint16_t event = e->event;
      if (event == ZMQ_EVENT_CONNECTED) {
        peer.connection.emplace(static_cast<int>(e->value));  // the new connection's descriptor
        peer.acked_seen = peer.connection->bytes_acked().value_or(0);
        peer.last_progress = std::chrono::steady_clock::now();
      } else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        peer.handshaken = true;
      } else if (event == ZMQ_EVENT_DISCONNECTED) {
        ++peer.breaks;
        peer.handshaken = false;
        peer.connection.reset();
        broke = true;
      }
    }
    return broke;
  }

  // A frame from a data socket the poll found readable, starting where the last frame came from,
  // one past it: a flood on the ROUTER must not keep the acknowledgements that come in on the
  // DEALERs waiting.
  std::optional<Incoming> take_frame(const PollSet& set) {
    for (size_t k = 0; k < set.data_items; ++k) {
      const size_t i = (next_socket + k) % set.data_items;
      if (!(set.items[i].revents & ZMQ_POLLIN)) continue;
      next_socket = i + 1;
      zmq::socket_t& s = i == 0 ? router : *peers[set.owners[i - 1]].dealer;
      auto parts = read_whole_message(s);
      const size_t envelope = i == 0 ? 1 : 0;  // the ROUTER prepends the routing id
      // Frames are single-part (docs/protocol.md, section 2); anything else is dropped here, as
      // the opening checks would drop a malformed frame.
      if (parts.size() != envelope + 1) continue;
      Incoming in;
      in.frame = ReceivedFrame(std::move(parts.back()));
      last_inbound = std::chrono::steady_clock::now();
      if (i == 0) in.route.assign(parts[0].data<char>(), parts[0].size());
      else in.via_dealer = set.owners[i - 1];
      return in;
    }
    return std::nullopt;
  }
};

Transport::Transport(NodeId, const std::string& bind_address, TransportOptions options)
    : impl_(std::make_unique<Impl>()), bind_address_(bind_address) {
  impl_->options = options;
  apply_socket_options(impl_->router, impl_->options);
  impl_->router.set(zmq::sockopt::router_mandatory, 1);
  if (const auto& keys = impl_->options.curve.keys) {
    impl_->zap = std::make_unique<CurveGate>(impl_->context, impl_->options.curve.peers, impl_->options.log);
    keys->make_server(impl_->router.handle());
  }
  const std::string monitor_endpoint = "inproc://fednode-monitor-router";
  if (zmq_socket_monitor(impl_->router.handle(), monitor_endpoint.c_str(),
                         ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0)
    throw zmq::error_t();
  impl_->router_monitor = std::make_unique<zmq::socket_t>(impl_->context, zmq::socket_type::pair);
  impl_->router_monitor->set(zmq::sockopt::linger, 0);
  impl_->router_monitor->connect(monitor_endpoint);
  try {
    impl_->router.bind(bind_address);
  } catch (const zmq::error_t& e) {
    const std::string unresolved = resolution_problem(bind_address);
    throw NetworkError("cannot listen on '" + bind_address + "': " + (unresolved.empty() ? e.what() : unresolved));
  }
}

Transport::~Transport() = default;

void Transport::add_peer(NodeId peer, const std::string& address) {
  if (impl_->options.curve.keys && !impl_->options.curve.peers.count(peer))
    throw InputError("transport: hop encryption is curve but node " + std::to_string(peer) + " has no public key");
  auto& p = impl_->peers[peer];
  if (p.address != address) {
    p.address = address;
    // A frame handed to the old connection may not have arrived: a break, so it goes again.
    if (p.dealer) ++p.breaks;
    p.handshaken = false;
    p.connection.reset();
    p.dealer.reset();
    p.monitor.reset();
    p.stream.reset();
    p.stream_ready.reset();
  }
}

std::string Transport::zeromq_version() {
  int major = 0, minor = 0, patch = 0;
  zmq_version(&major, &minor, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

ReceivedFrame::ReceivedFrame() = default;
ReceivedFrame::ReceivedFrame(zmq::message_t&& message)
    : message_(std::make_unique<zmq::message_t>(std::move(message))),
      data_(message_->data<char>()),
      size_(message_->size()) {}
ReceivedFrame::ReceivedFrame(ReceivedFrame&&) noexcept = default;
ReceivedFrame& ReceivedFrame::operator=(ReceivedFrame&&) noexcept = default;
ReceivedFrame::~ReceivedFrame() = default;

bool Transport::send(NodeId peer, const std::string& frame) {
  zmq::socket_t* s = impl_->dealer(peer);
  if (!s || impl_->peers[peer].stream) return false;
  zmq::message_t m(frame.data(), frame.size());
  return s->send(m, zmq::send_flags::dontwait).has_value();
}

bool Transport::send(NodeId peer, std::unique_ptr<OutgoingMessages>& messages) {
  if (!impl_->dealer(peer)) return false;
  Impl::Peer& p = impl_->peers[peer];
  if (p.stream || !messages) return false;
  p.stream = std::move(messages);
  p.stream_next = 0;
  impl_->pump(p);
  return true;
}

bool Transport::sending(NodeId peer) const {
  const auto it = impl_->peers.find(peer);
  return it != impl_->peers.end() && it->second.stream != nullptr;
}

void Transport::pump() {
  for (auto& [id, p] : impl_->peers)
    if (p.stream) impl_->pump(p);
}

void Transport::drop_queued(NodeId peer) {
  const auto it = impl_->peers.find(peer);
  if (it == impl_->peers.end()) return;
  it->second.dealer.reset();  // linger 0: the queue goes with it
  it->second.monitor.reset();
  it->second.handshaken = false;
  it->second.stream.reset();
  it->second.stream_ready.reset();
}

bool Transport::handshaken(NodeId peer) const {
  const auto it = impl_->peers.find(peer);
  return it != impl_->peers.end() && it->second.handshaken;
}

uint16_t Transport::bound_port() const {
  const std::string endpoint = impl_->router.get(zmq::sockopt::last_endpoint);
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos) return 0;
  try {
    return static_cast<uint16_t>(std::stoul(endpoint.substr(colon + 1)));
  } catch (const std::exception&) {
    return 0;
  }
}

uint64_t Transport::breaks(NodeId peer) const {
  const auto it = impl_->peers.find(peer);
  return it == impl_->peers.end() ? 0 : it->second.breaks;
}

std::chrono::steady_clock::time_point Transport::last_progress(NodeId peer) {
  const auto it = impl_->peers.find(peer);
  if (it == impl_->peers.end()) return {};
  Impl::Peer& p = it->second;
  if (p.connection) {
    const std::optional<uint64_t> acked = p.connection->bytes_acked();
    if (!acked) p.connection.reset();
    else if (*acked != p.acked_seen) {
      p.acked_seen = *acked;
      p.last_progress = std::chrono::steady_clock::now();
    }
  }
  return p.last_progress;
}

std::chrono::steady_clock::time_point Transport::last_inbound_progress() {
  auto& inbound = impl_->inbound;
  for (auto it = inbound.begin(); it != inbound.end();) {
    const std::optional<uint64_t> received = it->connection.bytes_received();
    if (!received) {
      it = inbound.erase(it);
      continue;
    }
    if (*received != it->received_seen) {
      it->received_seen = *received;
      impl_->last_inbound = std::chrono::steady_clock::now();
    }
    ++it;
  }
  return impl_->last_inbound;
}

bool Transport::reply(const ReplyPath& in, const std::string& frame) {
  try {
    if (in.via_dealer) {
      // An answer may go between a stream's chunks (a receipt for an ack that came meanwhile):
      // the receiver keeps its stream across it; only send() holds frames back behind a stream.
      zmq::message_t m(frame.data(), frame.size());
      zmq::socket_t* s = impl_->dealer(*in.via_dealer);
      return s && s->send(m, zmq::send_flags::dontwait).has_value();
    }
    zmq::message_t id(in.route.data(), in.route.size());
    zmq::message_t m(frame.data(), frame.size());
    if (!impl_->router.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    return impl_->router.send(m, zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return false;  // the connection closed since the frame came in
    throw;
  }
}

std::optional<Incoming> Transport::receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    Impl::PollSet set = impl_->poll_set();
    auto& items = set.items;
    const auto left = std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                deadline - std::chrono::steady_clock::now()));
    try {
      zmq::poll(items.data(), items.size(), left);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) return std::nullopt;  // a signal: let the caller look at its stop flag
      throw;
    }
    // Admission first: a handshake waits on its answer, while data can wait for the next turn.
    if (impl_->zap && (items.back().revents & ZMQ_POLLIN)) impl_->zap->answer_waiting();
    // A broken connection returns at once: its frames may need sending again (Outbox::pump).
    bool broke = false;
    for (size_t k = 0; k < set.monitored.size(); ++k)
      if (items[set.data_items + k].revents & ZMQ_POLLIN) broke |= Impl::take_monitor_events(*set.monitored[k]);
    if (items[set.router_monitor].revents & ZMQ_POLLIN) impl_->note_router_events();
    if (broke) return std::nullopt;
    if (auto in = impl_->take_frame(set)) return in;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
  }
}

int64_t Transport::curve_refusals() const { return impl_->zap ? impl_->zap->refusals() : 0; }

}  // namespace fednode
