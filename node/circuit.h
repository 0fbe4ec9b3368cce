// The names of connections that cross NAT (docs/deployment.md): a node that accepts no
// connections, and every node that meets a peer at a relay, names each connection it dials by the
// ZeroMQ routing id circuit_id(self, peer). Its peer, or the relay, sends back on the connection
// of that name, and a relay joins circuit (a, b) to circuit (b, a). The name is a claim, not a
// proof: under CurveZMQ the relay checks it against the key that made the connection, and every
// frame it carries is still sealed end to end.
#pragma once

#include "core/types.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace fednode {

// "FN", then `from` and `to` as 4 bytes each, big-endian: 10 bytes, never starting with the zero
// byte libzmq reserves for the routing ids it makes up.
std::string circuit_id(NodeId from, NodeId to);
// (from, to) of a circuit id, or nothing for any other routing id.
std::optional<std::pair<NodeId, NodeId>> parse_circuit_id(std::string_view id);

// A relay tells a node about the far end of a circuit with a two-part message: kRelayNoteTag,
// then one byte. Frames are single-part, so a note is never taken for one.
inline constexpr std::string_view kRelayNoteTag = "fednode-relay-note";
enum class RelayNote : char {
  PeerLeft = 'L',    // the far end's connection closed: what was sent through it may be lost
  PeerJoined = 'J',  // the far end is connected
};

}  // namespace fednode
