#include "node/transport.h"

#include "node/socket_options.h"
#include "node/transport_impl.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

namespace fednode {

Transport::Transport(NodeId self, const std::string& bind_address, TransportOptions options)
    : impl_(std::make_unique<Impl>()), bind_address_(options.dial_only ? "" : bind_address) {
  impl_->self = self;
  impl_->options = options;
  apply_socket_options(impl_->router, impl_->options);
  impl_->router.set(zmq::sockopt::router_mandatory, 1);
  // A peer that dials again after its connection died unseen (a NAT that forgot it, a pulled
  // cable) comes back under the same circuit name: the new connection takes it over.
  impl_->router.set(zmq::sockopt::router_handover, 1);
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
  if (impl_->options.dial_only) return;
  try {
    impl_->router.bind(bind_address);
  } catch (const zmq::error_t& e) {
    const std::string unresolved = resolution_problem(bind_address);
    throw NetworkError("cannot listen on '" + bind_address + "': " + (unresolved.empty() ? e.what() : unresolved));
  }
}

Transport::~Transport() = default;

void Transport::add_peer(NodeId peer, const std::string& address) {
  PeerRoute route;
  route.address = address;
  add_peer(peer, route);
}

void Transport::add_peer(NodeId peer, const PeerRoute& route) {
  if (impl_->options.curve.keys && !impl_->options.curve.peers.count(peer))
    throw InputError("transport: hop encryption is curve but node " + std::to_string(peer) + " has no public key");
  const bool known = impl_->peers.count(peer) > 0;
  auto& p = impl_->peers[peer];
  if (!known || !(p.route == route)) {
    // A frame handed to the old connection may not have arrived: a break, so it goes again.
    if (p.dealer || (known && p.route.kind == PeerRoute::Kind::Answer)) ++p.breaks;
    p.route = route;
    p.handshaken = false;
    p.connection.reset();
    p.dealer.reset();
    p.monitor.reset();
    p.stream.reset();
    p.stream_ready.reset();
    p.answers.clear();
  }
  if (impl_->eager(p)) impl_->dealer(peer);
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
  Impl::Peer& p = impl_->peers[peer];
  if ((!s && p.route.kind != PeerRoute::Kind::Answer) || p.stream) return false;
  zmq::message_t m(frame.data(), frame.size());
  return impl_->offer(peer, p, m);
}

bool Transport::send(NodeId peer, std::unique_ptr<OutgoingMessages>& messages) {
  zmq::socket_t* s = impl_->dealer(peer);
  Impl::Peer& p = impl_->peers[peer];
  if (!s && p.route.kind != PeerRoute::Kind::Answer) return false;
  if (p.stream || !messages) return false;
  p.stream = std::move(messages);
  p.stream_next = 0;
  impl_->pump(peer, p);
  return true;
}

bool Transport::sending(NodeId peer) const {
  const auto it = impl_->peers.find(peer);
  return it != impl_->peers.end() && it->second.stream != nullptr;
}

void Transport::pump() {
  for (auto& [id, p] : impl_->peers)
    if (p.stream || !p.answers.empty()) impl_->pump(id, p);
}

void Transport::drop_queued(NodeId peer) {
  const auto it = impl_->peers.find(peer);
  if (it == impl_->peers.end()) return;
  it->second.dealer.reset();  // linger 0: the queue goes with it
  it->second.monitor.reset();
  it->second.handshaken = false;
  it->second.stream.reset();
  it->second.stream_ready.reset();
  it->second.answers.clear();
  // Dropping what waits for a peer that answers on the ROUTER is not possible (the ROUTER keeps
  // its queue per connection); a resend goes after what is queued there.
  if (impl_->eager(it->second)) impl_->dealer(peer);  // the far end must keep finding this node
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
  // The ROUTER's connections are not told apart by node: any of them moving counts. Sampled at
  // most every 100 ms, for all such peers at once: a hub asks for each of hundreds of them.
  if (p.route.kind == PeerRoute::Kind::Answer) {
    const auto now = std::chrono::steady_clock::now();
    if (now - impl_->answer_sampled < std::chrono::milliseconds(100)) return impl_->last_answer_progress;
    impl_->answer_sampled = now;
    for (auto& c : impl_->inbound) {
      const std::optional<uint64_t> acked = c.connection.bytes_acked();
      if (acked && *acked != c.acked_seen) {
        c.acked_seen = *acked;
        impl_->last_answer_progress = std::chrono::steady_clock::now();
      }
    }
    return impl_->last_answer_progress;
  }
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
      // One the one-frame queue has no room for waits for it, ahead of the next chunk: acks of a
      // node that dials travel here, and its own stream keeps that queue full.
      zmq::message_t m(frame.data(), frame.size());
      zmq::socket_t* s = impl_->dealer(*in.via_dealer);
      if (!s) return false;
      Impl::Peer& p = impl_->peers[*in.via_dealer];
      if (p.answers.empty() && s->send(m, zmq::send_flags::dontwait)) return true;
      if (p.answers.size() >= kMaxWaitingAnswers) return false;
      p.answers.push_back(std::move(m));
      return true;
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
    auto left = std::max(std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                          deadline - std::chrono::steady_clock::now()));
    if (impl_->answer_backlog) left = std::min(left, std::chrono::milliseconds(2));
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
    if (items[set.router_monitor].revents & ZMQ_POLLIN) broke |= impl_->note_router_events();
    if (broke) return std::nullopt;
    if (auto in = impl_->take_frame(set, broke)) return in;
    if (broke) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
  }
}

bool Transport::answers_waiting() const {
  return std::any_of(impl_->peers.begin(), impl_->peers.end(), [](const auto& p) { return !p.second.answers.empty(); });
}

int64_t Transport::curve_refusals() const { return impl_->zap ? impl_->zap->refusals() : 0; }

}  // namespace fednode
