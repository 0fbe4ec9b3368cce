// Sending over a transport in tests: a connection is made in the background, so a DEALER's first
// sends may find no connection yet.
#pragma once

#include "node/transport.h"

#include <chrono>
#include <optional>
#include <string>

namespace fednode::test {

// Sends until `to` receives something, for up to 5 s.
inline std::optional<Incoming> deliver(Transport& from, NodeId peer, Transport& to, const std::string& frame) {
  for (int i = 0; i < 100; ++i) {
    from.send(peer, frame);
    if (auto in = to.receive(std::chrono::milliseconds(50))) return in;
  }
  return std::nullopt;
}

}  // namespace fednode::test
