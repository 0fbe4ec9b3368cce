// The ZeroMQ options every socket of the transport gets (docs/node.md, "Transport"). Its own
// header, including zmq.hpp, so that bench/bench_hop.cpp can give its raw-ZeroMQ reference exactly
// the same options without node/transport.h exposing ZeroMQ to every file that includes it.
#pragma once

#include "node/transport.h"

#include <zmq.hpp>

namespace fednode {

// Linger, the message size bound, ZMTP heartbeats and reconnection intervals.
void apply_socket_options(zmq::socket_t& s, const TransportOptions& options);

}  // namespace fednode
