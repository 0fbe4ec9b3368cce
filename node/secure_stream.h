// One message as a version-2 stream (docs/protocol.md, section 12): the sender's side seals a
// chunk when the transport has room for it, so that sealing the next chunk overlaps sending the
// last; the receiver's side opens each chunk as it arrives, from ZeroMQ's buffer straight into
// the message's plaintext, so that it never holds the whole ciphertext. Made by SecureChannel,
// which holds the keys (seal_stream, open_head).
#pragma once

#include "crypto/stream.h"
#include "node/secure_channel.h"
#include "node/transport.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

// Plaintext chunk size of the streams a node sends: small enough that the first chunk is on the
// wire after a fraction of a millisecond of sealing, large enough that per-message costs (a
// ZeroMQ message, a tag, a nonce computation) stay small.
constexpr uint32_t kDefaultStreamChunk = uint32_t{256} << 10;
// A node streams messages from this size up (to peers that open streams); smaller ones go as one
// frame, which costs one ZeroMQ message and one nonce less.
constexpr size_t kStreamFromBytes = size_t{64} << 10;

class SealedStream final : public OutgoingMessages {
 public:
  // `header` is the message's, its version and stream layout set.
  SealedStream(EnvelopeHeader header, std::string plaintext, const MessageKeys& keys, StreamCipher cipher);
  // Knowledge encoded as it is sealed: the values of chunk i are converted when chunk i is
  // written, so encoding overlaps sending too. write() then throws ProtocolError for a value the
  // encoding refuses (NaN, beyond float16), and the stream cannot go on.
  SealedStream(EnvelopeHeader header, DeferredPayload payload, const MessageKeys& keys, StreamCipher cipher);

  const EnvelopeHeader& header() const { return header_; }
  size_t count() const override { return static_cast<size_t>(header_.stream->chunks()); }
  size_t size(size_t i) const override;
  // Message 0 is the head frame carrying chunk 0; message i > 0 is chunk i. Chunks are sealed in
  // batches, a batch's chunks side by side on the worker pool (core/parallel.h), so that a node
  // with several cores seals at several times one core's speed; the next batch is sealed when
  // the transport asks for its first chunk.
  std::string take(size_t i) override;

 private:
  EnvelopeHeader header_;
  std::string header_bytes_;
  std::string plaintext_;
  std::optional<DeferredPayload> deferred_;  // instead of plaintext_
  uint8_t nonce_[kStreamNonceBytes];  // before key_, which draws it
  StreamKey key_;
  std::string head_prefix_;  // the head frame up to its ciphertext
  // Sealed and not taken yet: messages [batch_first_, batch_first_ + batch_.size()).
  std::vector<std::string> batch_;
  size_t batch_first_ = 0;
  // Writes message i (its prefix, then chunk i sealed) into `out`; thread-safe for distinct i
  // once the plaintext below the chunk's end is written.
  void seal_message(size_t i, std::string& out) const;
};

// A stream whose head was opened (SecureChannel::open_head: frame, header, header tag, chunk 0,
// replay window), taking its further chunks in order.
class IncomingStream {
 public:
  IncomingStream(EnvelopeHeader header, std::string header_bytes, StreamKey key);

  const EnvelopeHeader& header() const { return header_; }
  // Chunks taken so far (checked, and opened or waiting for their batch).
  uint64_t chunks_taken() const { return next_; }
  bool complete() const { return next_ == header_.stream->chunks() && pending_.empty(); }
  // Takes the next chunk. Its index and size are checked at once; it is opened into the
  // plaintext together with the chunks before it not opened yet, side by side on the worker pool,
  // once a batch is together or it is the last, and `holder` keeps its bytes until then (without
  // one, the caller keeps them). Throws RejectedMessage (authenticated header): Malformed for a
  // chunk of another index or size, CiphertextTampered for one that does not open; the stream
  // is then of no further use.
  void add(const ChunkView& chunk, ReceivedFrame holder = {});
  // Once complete: the message as opened, its plaintext in this stream's memory.
  OpenedFrame opened() const;

 private:
  friend class SecureChannel;
  // Opens chunk `index` into `out`, or into the plaintext where out is null. Throws SecurityError.
  void open_chunk(uint64_t index, std::string_view ciphertext, char* out);
  EnvelopeHeader header_;
  std::string header_bytes_;
  StreamKey key_;
  std::unique_ptr<char[]> plaintext_;  // allocated at the first chunk, not zero-filled: decryption writes every byte
  uint64_t next_ = 0;  // chunks taken (checked), opened or pending
  struct Pending {
    uint64_t index;
    std::string_view ciphertext;
    ReceivedFrame holder;
  };
  std::vector<Pending> pending_;
};

}  // namespace fednode
