// Replay protection on the receiving side: per sender, the highest msg_id accepted and which of
// the kWindow ids below it were seen (the sliding window of IPsec/DTLS). Ids may arrive out of
// order within the window, so a retried older message still gets through once; a repeat, or an
// id more than kWindow below the highest, is refused.
//
// The guard is state that must outlive a crash: serialize() it into the node's state directory
// together with what the accepted message changed, before acknowledging the message, and
// deserialize() it on restart, so that a restarted node still refuses old messages.
#pragma once

#include "core/types.h"

#include <bitset>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace fednode {

enum class ReplayVerdict { Fresh, Duplicate, TooOld };
const char* to_string(ReplayVerdict v);

class ReplayGuard {
 public:
  static constexpr uint64_t kWindow = 1024;

  // What accept() would say, without recording anything.
  ReplayVerdict check(NodeId sender, uint64_t msg_id) const;
  // Records msg_id when it is Fresh. Id 0 is never valid (TooOld).
  ReplayVerdict accept(NodeId sender, uint64_t msg_id);

  size_t senders() const { return state_.size(); }
  uint64_t highest(NodeId sender) const;  // 0 when nothing was accepted from `sender`

  // Binary, versioned, with a BLAKE2b checksum (format in docs/protocol.md, "Replay state").
  std::string serialize() const;
  // Throws InputError naming `where` for anything but a well-formed, intact state.
  static ReplayGuard deserialize(std::string_view bytes, const std::string& where,
                                 size_t max_senders = size_t{1} << 20);

 private:
  struct Window {
    uint64_t top = 0;            // highest accepted id
    std::bitset<kWindow> seen;   // bit i: id top - i was accepted
  };
  std::map<NodeId, Window> state_;
};

}  // namespace fednode
