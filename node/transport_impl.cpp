// Transport::Impl's steps (node/transport_impl.h): opening DEALERs, handing messages to the
// connection a peer is reached on, and reading what the sockets and their monitors say.
#include "node/transport_impl.h"

#include "node/circuit.h"
#include "node/socket_options.h"

#include <algorithm>
#include <cerrno>

namespace fednode {

bool Transport::Impl::offer(NodeId id, Peer& p, zmq::message_t& m) {
  if (p.route.kind != PeerRoute::Kind::Answer) return p.dealer && p.dealer->send(m, zmq::send_flags::dontwait).has_value();
  const std::string route = circuit_id(id, self);
  try {
    zmq::message_t to(route.data(), route.size());
    if (!router.send(to, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    return router.send(m, zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return false;  // it has not dialled yet, or its connection closed
    throw;
  }
}

bool Transport::Impl::pump(NodeId id, Peer& p) {
  if (!p.dealer && p.route.kind != PeerRoute::Kind::Answer) {  // its socket was closed: a new address, or dropped
    p.stream.reset();
    p.stream_ready.reset();
    p.answers.clear();
  }
  while (!p.answers.empty()) {
    if (!offer(id, p, p.answers.front())) return true;
    p.answers.pop_front();
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
    if (!offer(id, p, *p.stream_ready)) return true;
    p.stream_ready.reset();
  }
  return false;
}

zmq::socket_t* Transport::Impl::dealer(NodeId peer) {
  auto it = peers.find(peer);
  if (it == peers.end()) throw InputError("transport: no address for node " + std::to_string(peer));
  Peer& p = it->second;
  if (p.route.kind == PeerRoute::Kind::Answer) return nullptr;
  if (p.route.kind == PeerRoute::Kind::Dial && p.route.address.empty()) return nullptr;
  if (!p.dealer) {
    p.dealer = open_dealer(peer, p);
    p.handshaken = false;
  }
  return p.dealer.get();
}

std::unique_ptr<zmq::socket_t> Transport::Impl::open_dealer(NodeId peer, Peer& p) {
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
  const bool relayed = p.route.kind == PeerRoute::Kind::Relay;
  // Named, so that the peer (or the relay) knows whose connection this is and sends back on it.
  if (relayed || options.dial_only) s->set(zmq::sockopt::routing_id, circuit_id(self, peer));
  const RelayPoint* relay = relayed ? &p.route.relays.at(p.relay_at) : nullptr;
  const std::string& address = relayed ? relay->address : p.route.address;
  if (options.curve.keys) {
    if (relayed && !relay->key)
      throw InputError("transport: hop encryption is curve but relay '" + relay->name + "' has no public key");
    options.curve.keys->make_client(s->handle(), relayed ? *relay->key : options.curve.peers.at(peer));
  }
  // Before connecting: a connection that breaks at once is counted too.
  const std::string endpoint =
      "inproc://fednode-monitor-" + std::to_string(peer) + "-" + std::to_string(++monitors_made);
  if (zmq_socket_monitor(s->handle(), endpoint.c_str(),
                         ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0)
    throw zmq::error_t();
  auto monitor = std::make_unique<zmq::socket_t>(context, zmq::socket_type::pair);
  monitor->set(zmq::sockopt::linger, 0);
  monitor->connect(endpoint);
  p.monitor = std::move(monitor);
  try {
    s->connect(address);
  } catch (const zmq::error_t& e) {
    throw InputError("cannot connect to " + (relayed ? "relay '" + relay->name + "' for node " : "node ") +
                     std::to_string(peer) + " at '" + address + "': " + e.what());
  }
  return s;
}

bool Transport::Impl::note_router_events() {
  bool broke = false;
  while (const auto e = next_monitor_event(*router_monitor)) {
    if (!e->complete) continue;
    const uint16_t event = e->event;
    const int fd = static_cast<int>(e->value);
    inbound.erase(std::remove_if(inbound.begin(), inbound.end(), [&](const Inbound& c) { return c.fd == fd; }),
                  inbound.end());
    if (event == ZMQ_EVENT_ACCEPTED) {
      Inbound c{fd, TcpProgress(fd), 0, 0};
      c.received_seen = c.connection.bytes_received().value_or(0);
      c.acked_seen = c.connection.bytes_acked().value_or(0);
      inbound.push_back(std::move(c));
      last_inbound = last_answer_progress = std::chrono::steady_clock::now();
    } else {
      broke |= count_answer_break(fd);
    }
  }
  return broke;
}

bool Transport::Impl::count_answer_break(int fd) {
  bool broke = false;
  for (auto& [id, p] : peers) {
    if (p.route.kind != PeerRoute::Kind::Answer) continue;
    // Its own connection, or one it may have had: it has sent nothing on its newest yet.
    if (p.answer_fd != fd && p.answer_fd != -1) continue;
    ++p.breaks;
    p.answer_fd = -1;
    broke = true;
  }
  return broke;
}

void Transport::Impl::note_answer_connection(const std::string& route, const zmq::message_t& frame) {
  const auto circuit = parse_circuit_id(route);
  if (!circuit || circuit->second != self) return;
  const auto it = peers.find(circuit->first);
  if (it == peers.end() || it->second.route.kind != PeerRoute::Kind::Answer) return;
  // ZMQ_SRCFD: deprecated in libzmq's header for its reuse of descriptors, harmless here, where
  // a closed descriptor's events come before a new connection's frames.
  const int fd = zmq_msg_get(const_cast<zmq_msg_t*>(frame.handle()), ZMQ_SRCFD);
  if (fd >= 0) it->second.answer_fd = fd;
}

void Transport::Impl::fail_over(NodeId id, Peer& p, std::chrono::steady_clock::time_point now) {
  if (p.route.kind != PeerRoute::Kind::Relay || p.route.relays.size() < 2 || !p.dealer) return;
  if (p.handshaken) {
    p.relay_down_since = {};
    return;
  }
  if (p.relay_down_since == std::chrono::steady_clock::time_point{}) p.relay_down_since = now;
  if (now - p.relay_down_since < std::chrono::milliseconds(options.relay_failover_ms)) return;
  const std::string gone = p.route.relays[p.relay_at].name;
  p.relay_at = (p.relay_at + 1) % p.route.relays.size();
  if (options.log)
    options.log("relay '" + gone + "' has not been reachable for " + std::to_string(options.relay_failover_ms / 1000) +
                " s: meeting node " + std::to_string(id) + " at relay '" + p.route.relays[p.relay_at].name + "'");
  // What went to the old relay may not have arrived: a break, so it goes again.
  ++p.breaks;
  p.connection.reset();
  p.monitor.reset();
  p.stream.reset();
  p.stream_ready.reset();
  p.answers.clear();
  p.dealer = open_dealer(id, p);
  p.relay_down_since = now;
}

Transport::Impl::PollSet Transport::Impl::poll_set() {
  PollSet set;
  answer_backlog = false;
  set.items.push_back({router.handle(), 0, ZMQ_POLLIN, 0});
  const auto now = std::chrono::steady_clock::now();
  for (auto& [id, p] : peers) fail_over(id, p, now);
  for (auto& [id, p] : peers) {
    if (!p.dealer) {
      if (p.stream && pump(id, p)) answer_backlog = true;
      continue;
    }
    // A stream or answers the queue has not taken all of wake the poll when it has room again.
    const bool backlog = (p.stream || !p.answers.empty()) && pump(id, p);
    const short events = backlog ? ZMQ_POLLIN | ZMQ_POLLOUT : ZMQ_POLLIN;
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

bool Transport::Impl::take_monitor_events(Peer& peer) {
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

bool Transport::Impl::take_relay_note(Peer& p, const std::vector<zmq::message_t>& parts) {
  if (p.route.kind != PeerRoute::Kind::Relay || parts.size() != 2 || parts[1].size() != 1 ||
      std::string_view(parts[0].data<char>(), parts[0].size()) != kRelayNoteTag)
    return false;
  if (static_cast<RelayNote>(*parts[1].data<char>()) != RelayNote::PeerLeft) return false;
  // Frames to `peer` that the relay had handed to the far end's connection may be lost with it:
  // for the outbox, the same as a break of this node's own connection.
  ++p.breaks;
  return true;
}

std::optional<Incoming> Transport::Impl::take_frame(const PollSet& set, bool& broke) {
  for (size_t k = 0; k < set.data_items; ++k) {
    const size_t i = (next_socket + k) % set.data_items;
    if (!(set.items[i].revents & ZMQ_POLLIN)) continue;
    next_socket = i + 1;
    const NodeId owner = i == 0 ? 0 : set.owners[i - 1];
    zmq::socket_t& s = i == 0 ? router : *peers[owner].dealer;
    auto parts = read_whole_message(s);
    const size_t envelope = i == 0 ? 1 : 0;  // the ROUTER prepends the routing id
    if (i > 0 && take_relay_note(peers[owner], parts)) {
      broke = true;
      return std::nullopt;
    }
    // Frames are single-part (docs/protocol.md, section 2); anything else is dropped here, as
    // the opening checks would drop a malformed frame.
    if (parts.size() != envelope + 1) continue;
    if (i == 0) note_answer_connection(parts[0].to_string(), parts.back());
    Incoming in;
    in.frame = ReceivedFrame(std::move(parts.back()));
    last_inbound = std::chrono::steady_clock::now();
    if (i == 0) in.route.assign(parts[0].data<char>(), parts[0].size());
    else in.via_dealer = owner;
    return in;
  }
  return std::nullopt;
}

}  // namespace fednode
