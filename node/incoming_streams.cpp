#include "node/incoming_streams.h"

#include "topology/plan.h"

namespace fednode {

void IncomingStreams::begin(const std::string& connection, std::unique_ptr<IncomingStream> stream) {
  const NodeId from = stream->header().from;
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (it->second.stream->header().from != from) {
      ++it;
      continue;
    }
    drop(it->second, "its sender began message " + std::to_string(stream->header().msg_id) + " anew");
    it = streams_.erase(it);
  }
  streams_[connection] = InProgress{std::move(stream), Clock::now()};
}

IncomingStream* IncomingStreams::find(const std::string& connection, uint64_t msg_id) {
  const auto it = streams_.find(connection);
  if (it == streams_.end() || it->second.stream->header().msg_id != msg_id) return nullptr;
  return it->second.stream.get();
}

void IncomingStreams::touched(const std::string& connection) {
  const auto it = streams_.find(connection);
  if (it != streams_.end()) it->second.last_chunk = Clock::now();
}

std::unique_ptr<IncomingStream> IncomingStreams::take(const std::string& connection) {
  const auto it = streams_.find(connection);
  if (it == streams_.end()) return nullptr;
  std::unique_ptr<IncomingStream> stream = std::move(it->second.stream);
  streams_.erase(it);
  return stream;
}

void IncomingStreams::drop_stalled(std::chrono::milliseconds silence) {
  const auto now = Clock::now();
  for (auto it = streams_.begin(); it != streams_.end();) {
    if (now - it->second.last_chunk <= silence) {
      ++it;
      continue;
    }
    drop(it->second, "no chunk came for " + deadline_text(static_cast<double>(silence.count()) / 1000) + " s");
    it = streams_.erase(it);
  }
}

void IncomingStreams::drop_all(const std::string& why) {
  for (const auto& [connection, s] : streams_) drop(s, why);
  streams_.clear();
}

void IncomingStreams::drop(const InProgress& s, const std::string& why) {
  ++abandoned_;
  const EnvelopeHeader& h = s.stream->header();
  say_.warn("dropped the unfinished stream of " + std::string(to_string(h.type)) + " message " +
            std::to_string(h.msg_id) + " from " + who_(h.from) + " after " + std::to_string(s.stream->chunks_taken()) +
            " of its " + std::to_string(h.stream->chunks()) + " chunks: " + why + "; nothing of it is used");
}

}  // namespace fednode
