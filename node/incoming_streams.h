// The version-2 streams a node is receiving (docs/protocol.md, section 12), by connection: at most
// one per sender, the newest, so that what they hold is bounded by the allow list times
// max_message_bytes. A stream that does not finish is dropped and said, never used: one its
// sender replaced with a newer one (a resend on a new connection after the old one broke), one
// whose chunks stopped coming for longer than a connection may be silent (its sender died or its
// connection did; a resend comes as a new stream), and one still unfinished when the node closes.
#pragma once

#include "core/log.h"
#include "node/secure_stream.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace fednode {

class IncomingStreams {
 public:
  using Clock = std::chrono::steady_clock;
  using Who = std::function<std::string(NodeId)>;

  IncomingStreams(Say say, Who who) : say_(std::move(say)), who_(std::move(who)) {}

  // A stream's head opened on `connection`: it replaces any unfinished stream of its sender.
  void begin(const std::string& connection, std::unique_ptr<IncomingStream> stream);
  // The stream in progress on `connection` for message `msg_id`; null when there is none (the
  // rest of a stream refused at its head, or one replaced or dropped).
  IncomingStream* find(const std::string& connection, uint64_t msg_id);
  // A chunk came on `connection`'s stream now.
  void touched(const std::string& connection);
  // The stream on `connection`, finished or failed, leaves.
  std::unique_ptr<IncomingStream> take(const std::string& connection);
  // Drops the streams with no chunk for longer than `silence`, saying so.
  void drop_stalled(std::chrono::milliseconds silence);
  // Drops every stream still unfinished, saying why (the node closes).
  void drop_all(const std::string& why);
  // Streams dropped unfinished so far.
  int64_t abandoned() const { return abandoned_; }

 private:
  struct InProgress {
    std::unique_ptr<IncomingStream> stream;
    Clock::time_point last_chunk;
  };
  void drop(const InProgress& s, const std::string& why);

  Say say_;
  Who who_;
  std::map<std::string, InProgress> streams_;
  int64_t abandoned_ = 0;
};

}  // namespace fednode
