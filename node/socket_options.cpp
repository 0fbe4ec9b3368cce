#include "node/socket_options.h"

#include <algorithm>
#include <cstring>

namespace fednode {

std::vector<zmq::message_t> read_whole_message(zmq::socket_t& s) {
  std::vector<zmq::message_t> parts;
  do {
    zmq::message_t m;
    if (!s.recv(m, zmq::recv_flags::dontwait)) break;
    parts.push_back(std::move(m));
  } while (parts.back().more());
  return parts;
}

void apply_socket_options(zmq::socket_t& s, const TransportOptions& options) {
  s.set(zmq::sockopt::linger, options.linger_ms);
  s.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options.max_message_bytes));
  s.set(zmq::sockopt::rcvhwm, options.receive_queue);
  const int silence_s = std::max(1, options.silence_ms / 1000);
  s.set(zmq::sockopt::tcp_keepalive, 1);
  // Probes start after a third of the silence and come every sixth: three unanswered ones
  // (the count) end the connection within the silence.
  s.set(zmq::sockopt::tcp_keepalive_idle, std::max(1, silence_s / 3));
  s.set(zmq::sockopt::tcp_keepalive_intvl, std::max(1, silence_s / 6));
  s.set(zmq::sockopt::tcp_keepalive_cnt, 3);
  s.set(zmq::sockopt::tcp_maxrt, options.silence_ms);
  // A peer that is down is redialled every 0.1 s, backing off to 0.5 s: a finished node run
  // again listens for about a second, and with libzmq's backoff up to 2 s a hub's redial fell
  // between its starts and missed it (it never took the refitted head the hub was offering).
  s.set(zmq::sockopt::reconnect_ivl, 100);
  s.set(zmq::sockopt::reconnect_ivl_max, 500);
}

std::optional<MonitorEvent> next_monitor_event(zmq::socket_t& monitor) {
  const std::vector<zmq::message_t> parts = read_whole_message(monitor);
  if (parts.empty()) return std::nullopt;
  MonitorEvent e;
  if (parts[0].size() < sizeof e.event + sizeof e.value) return e;
  std::memcpy(&e.event, parts[0].data(), sizeof e.event);
  std::memcpy(&e.value, static_cast<const char*>(parts[0].data()) + sizeof e.event, sizeof e.value);
  e.complete = true;
  return e;
}

}  // namespace fednode
