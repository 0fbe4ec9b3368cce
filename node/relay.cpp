#include "node/relay.h"

#include "node/circuit.h"
#include "node/curve_gate.h"
#include "node/socket_options.h"

#include <zmq.hpp>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <set>
#include <vector>

namespace fednode {
namespace {

using Route = std::pair<NodeId, NodeId>;  // (from, to): frames from `from` for `to`

std::string route_text(const Route& r) { return std::to_string(r.first) + " -> " + std::to_string(r.second); }

}  // namespace

struct Relay::Impl {
  RelayOptions options;
  zmq::context_t context{1};
  std::unique_ptr<CurveGate> zap;
  zmq::socket_t router{context, zmq::socket_type::router};
  std::unique_ptr<zmq::socket_t> monitor;
  struct Circuit {
    std::deque<zmq::message_t> held;  // for `to`, not yet taken by its connection
    uint64_t held_bytes = 0;
    bool absent = false;  // the last try found no connection of `to`
    bool lost = false;    // frames were dropped: tell `from` once `to` is back
  };
  std::map<Route, Circuit> circuits;
  std::map<int, std::set<Route>> routes_of;  // a connection's descriptor: the circuits that came in on it
  RelayCounters counters;

  // Hands `m` to the connection of circuit (to, from); false when it has none or no room.
  bool deliver(const Route& r, zmq::message_t& m, bool note = false) {
    const std::string to = circuit_id(r.second, r.first);
    try {
      zmq::message_t id(to.data(), to.size());
      if (!router.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
      if (!note) return router.send(m, zmq::send_flags::dontwait).has_value();
      zmq::message_t tag(kRelayNoteTag.data(), kRelayNoteTag.size());
      router.send(tag, zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      return router.send(m, zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t& e) {
      if (e.num() == EHOSTUNREACH) return false;
      throw;
    }
  }

  // Tells r.second about r.first, on the connection of circuit (r.second, r.first).
  bool note(const Route& r, RelayNote what) {
    zmq::message_t code(1);
    *code.data<char>() = static_cast<char>(what);
    return deliver(r, code, true);
  }

  void flush(const Route& r, Circuit& c) {
    while (!c.held.empty()) {
      const uint64_t size = c.held.front().size();
      if (!deliver(r, c.held.front())) {
        c.absent = true;
        break;
      }
      c.absent = false;
      c.held.pop_front();
      c.held_bytes -= size;
      counters.held_bytes -= size;
      ++counters.frames;
      counters.bytes += size;
    }
    if (c.held.empty()) c.absent = false;
    if (c.absent && c.held_bytes > options.max_circuit_bytes) drop(r, c);
  }

  void drop(const Route& r, Circuit& c) {
    counters.dropped += c.held.size();
    counters.held_bytes -= c.held_bytes;
    c.held.clear();
    c.held_bytes = 0;
    if (!c.lost && options.log) options.log("node " + std::to_string(r.second) + " is not connected: dropped frames " + route_text(r) + "; its sender is told to send again once it is");
    c.lost = true;
  }

  // A circuit whose frames were dropped: once its recipient is connected, its sender sends again.
  void tell_lost(const Route& r, Circuit& c) {
    if (!c.lost || !note(r, RelayNote::PeerJoined)) return;  // the recipient is back when it takes a note
    c.lost = false;
    if (note(Route{r.second, r.first}, RelayNote::PeerLeft)) ++counters.peer_left_notes;
  }

  void take(std::vector<zmq::message_t>& parts) {
    const auto route = parts.empty() ? std::nullopt : parse_circuit_id(parts[0].to_string_view());
    const auto member = [&](NodeId id) { return options.nodes.empty() || options.nodes.count(id) > 0; };
    if (!route || parts.size() != 2 || route->first == route->second || !member(route->first) ||
        !member(route->second)) {
      ++counters.refused;
      return;
    }
    if (options.keys) {
      // The name is the client's claim; the key its connection proved is the ZAP handler's answer.
      const char* user = nullptr;
      try {
        user = parts[1].gets("User-Id");
      } catch (const zmq::error_t&) {
      }
      if (!user || std::to_string(route->first) != user) {
        if (++counters.refused % 100 == 1 && options.log)
          options.log("refused frames on circuit " + route_text(*route) + " from a connection whose key is node " +
                      (user ? user : "?") + "'s");
        return;
      }
    }
    const int fd = zmq_msg_get(parts[1].handle(), ZMQ_SRCFD);
    if (fd >= 0) routes_of[fd].insert(*route);
    Circuit& c = circuits[*route];
    counters.circuits = circuits.size();
    if (c.lost) {  // part of what its sender sends again in full, once told
      ++counters.dropped;
      return;
    }
    c.held_bytes += parts[1].size();
    counters.held_bytes += parts[1].size();
    c.held.push_back(std::move(parts[1]));
    flush(*route, c);
  }

  // A connection closed. Frames handed to it may be lost: their senders are told. Its own
  // frames still held are dropped: its node counts the break and sends them again.
  void closed(int fd) {
    const auto it = routes_of.find(fd);
    if (it == routes_of.end()) {
      // It carried nothing in: it may have been the far end of any circuit.
      for (const auto& [r, c] : circuits)
        if (note(Route{r.second, r.first}, RelayNote::PeerLeft)) ++counters.peer_left_notes;
      return;
    }
    const std::set<Route> routes = std::move(it->second);
    routes_of.erase(it);
    for (const Route& r : routes) {
      Circuit& c = circuits[r];
      counters.held_bytes -= c.held_bytes;
      c.held.clear();
      c.held_bytes = 0;
      c.lost = false;
      if (note(r, RelayNote::PeerLeft)) ++counters.peer_left_notes;
    }
  }

  void monitor_events() {
    while (const auto e = next_monitor_event(*monitor))
      if (e->complete && e->event == ZMQ_EVENT_DISCONNECTED) closed(static_cast<int>(e->value));
  }
};

Relay::Relay(RelayOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  TransportOptions t;
  t.max_message_bytes = impl_->options.max_message_bytes;
  t.silence_ms = impl_->options.silence_ms;
  apply_socket_options(impl_->router, t);
  impl_->router.set(zmq::sockopt::router_mandatory, 1);
  impl_->router.set(zmq::sockopt::router_handover, 1);
  // A few frames per connection each way: the rest waits in TCP, or in the circuits' queues.
  impl_->router.set(zmq::sockopt::rcvhwm, 8);
  impl_->router.set(zmq::sockopt::sndhwm, 8);
  if (impl_->options.keys) {
    impl_->zap = std::make_unique<CurveGate>(impl_->context, impl_->options.allowed, impl_->options.log);
    impl_->options.keys->make_server(impl_->router.handle());
  }
  const std::string endpoint = "inproc://fednode-relay-monitor";
  if (zmq_socket_monitor(impl_->router.handle(), endpoint.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) throw zmq::error_t();
  impl_->monitor = std::make_unique<zmq::socket_t>(impl_->context, zmq::socket_type::pair);
  impl_->monitor->set(zmq::sockopt::linger, 0);
  impl_->monitor->connect(endpoint);
  try {
    impl_->router.bind(impl_->options.bind);
  } catch (const zmq::error_t& e) {
    throw NetworkError("relay: cannot listen on '" + impl_->options.bind + "': " + e.what());
  }
}

Relay::~Relay() = default;

void Relay::step(std::chrono::milliseconds wait) {
  Impl& m = *impl_;
  bool waiting = false;
  for (auto& [r, c] : m.circuits) {
    if (!c.held.empty()) m.flush(r, c);
    m.tell_lost(r, c);
    waiting |= !c.held.empty() || c.lost;
  }
  // Over the bound in all: frames for absent recipients go first, then nothing is read until
  // the slow ones have taken theirs.
  if (m.counters.held_bytes > m.options.max_held_bytes)
    for (auto& [r, c] : m.circuits)
      if (c.absent) m.drop(r, c);
  const bool reading = m.counters.held_bytes <= m.options.max_held_bytes;
  std::vector<zmq::pollitem_t> items{{m.router.handle(), 0, static_cast<short>(reading ? ZMQ_POLLIN : 0), 0},
                                     {m.monitor->handle(), 0, ZMQ_POLLIN, 0}};
  if (m.zap) items.push_back({m.zap->socket().handle(), 0, ZMQ_POLLIN, 0});
  try {
    zmq::poll(items.data(), items.size(), waiting ? std::min(wait, std::chrono::milliseconds(20)) : wait);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return;
    throw;
  }
  if (m.zap && (items[2].revents & ZMQ_POLLIN)) m.zap->answer_waiting();
  if (items[1].revents & ZMQ_POLLIN) m.monitor_events();
  for (int k = 0; k < 64 && reading; ++k) {
    auto parts = read_whole_message(m.router);
    if (parts.empty()) break;
    m.take(parts);
  }
}

void Relay::run(const std::atomic<bool>& stop) {
  while (!stop.load()) step(std::chrono::milliseconds(200));
}

RelayCounters Relay::counters() const { return impl_->counters; }

uint16_t Relay::bound_port() const {
  const std::string endpoint = impl_->router.get(zmq::sockopt::last_endpoint);
  const auto colon = endpoint.rfind(':');
  return colon == std::string::npos ? 0 : static_cast<uint16_t>(std::stoul(endpoint.substr(colon + 1)));
}

std::string relay_metrics(const std::string& name, const RelayCounters& c) {
  const std::string label = "{relay=\"" + name + "\"}";
  std::string out;
  const auto metric = [&](const char* metric_name, const char* type, const char* help, uint64_t v) {
    out += std::string("# HELP ") + metric_name + " " + help + "\n# TYPE " + metric_name + " " + type + "\n" +
           metric_name + label + " " + std::to_string(v) + "\n";
  };
  metric("fednode_relay_frames_total", "counter", "Frames handed to their recipient's connection.", c.frames);
  metric("fednode_relay_bytes_total", "counter", "Bytes of those frames.", c.bytes);
  metric("fednode_relay_refused_total", "counter", "Frames not carried: no circuit, a circuit not of the sender's key, multi-part.", c.refused);
  metric("fednode_relay_dropped_total", "counter", "Frames dropped while their recipient was absent past the circuit's bound.", c.dropped);
  metric("fednode_relay_peer_left_notes_total", "counter", "Senders told that what they sent may be lost.", c.peer_left_notes);
  metric("fednode_relay_held_bytes", "gauge", "Bytes waiting for their recipient's connection.", c.held_bytes);
  metric("fednode_relay_circuits", "gauge", "Circuits that carried something.", c.circuits);
  return out;
}

}  // namespace fednode
