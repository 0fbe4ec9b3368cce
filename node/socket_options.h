// The ZeroMQ options every socket of the transport gets (docs/node.md, "Transport"). Its own
// header, including zmq.hpp, so that bench/bench_hop.cpp can give its raw-ZeroMQ reference exactly
// the same options without node/transport.h exposing ZeroMQ to every file that includes it.
#pragma once

#include "node/transport.h"

#include <zmq.hpp>

#include <vector>

namespace fednode {

// Linger, the message size bound, ZMTP heartbeats and reconnection intervals.
void apply_socket_options(zmq::socket_t& s, const TransportOptions& options);

// One whole (possibly multi-part) message waiting on `s`, or nothing when none waits.
std::vector<zmq::message_t> read_whole_message(zmq::socket_t& s);

}  // namespace fednode
