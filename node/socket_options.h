// The ZeroMQ options every socket of the transport gets (docs/node.md, "Transport"). Its own
// header, including zmq.hpp, so that bench/bench_hop.cpp can give its raw-ZeroMQ reference exactly
// the same options without node/transport.h exposing ZeroMQ to every file that includes it.
#pragma once

#include "node/transport.h"

#include <zmq.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace fednode {

// Linger, the message size bound, ZMTP heartbeats and reconnection intervals.
void apply_socket_options(zmq::socket_t& s, const TransportOptions& options);

// One whole (possibly multi-part) message waiting on `s`, or nothing when none waits.
std::vector<zmq::message_t> read_whole_message(zmq::socket_t& s);

// An event of a socket monitor (zmq_socket_monitor): two parts, 2 bytes of event id and 4 of
// value (for connections, the descriptor), then the endpoint.
struct MonitorEvent {
  uint16_t event = 0;
  uint32_t value = 0;
  bool complete = false;  // the first part held both; else event and value are 0
};
// The next event waiting on `monitor`, or nothing when none waits.
std::optional<MonitorEvent> next_monitor_event(zmq::socket_t& monitor);

}  // namespace fednode
