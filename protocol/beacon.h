// Discovery beacons (docs/protocol.md, section 13): the UDP datagram a node broadcasts on its LAN
// to say "node ID of run R listens on TCP port P, with this public key". A beacon is a hint, never
// a credential — anyone can send one — so the node dials the address it names and trusts it only
// after the CurveZMQ handshake proves the topology's key for that node (node/peer_finder.h).
// Fixed size and flat (no MessagePack): a stranger's datagram is read in one bounded step.
#pragma once

#include "core/contributors.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fednode {

constexpr size_t kBeaconBytes = 52;
constexpr uint8_t kBeaconVersion = 1;
// Which run a beacon belongs to, without giving the run id away: the first 8 bytes of a keyed
// hash of the run id (crypto's beacon_run_tag). Beacons of other runs on the LAN are ignored.
using RunTag = std::array<uint8_t, 8>;

struct Beacon {
  RunTag run{};
  uint32_t node = 0;                 // NodeId
  uint16_t port = 0;                 // where its listening socket takes connections (TCP)
  std::array<uint8_t, 32> key{};     // its X25519 public key, as the topology lists it
};

std::string encode_beacon(const Beacon& beacon);
// The beacon in `bytes`, or nullopt with `why` set (wrong size, magic, version, reserved byte,
// port 0). Never throws, never allocates beyond `why`.
std::optional<Beacon> decode_beacon(std::string_view bytes, std::string* why);

}  // namespace fednode
