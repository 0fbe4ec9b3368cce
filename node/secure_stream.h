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
  // Message 0 is the head frame carrying chunk 0; message i > 0 is chunk i.
  void write(size_t i, char* out) override;

 private:
  EnvelopeHeader header_;
  std::string header_bytes_;
  std::string plaintext_;
  std::optional<DeferredPayload> deferred_;  // instead of plaintext_
  uint8_t nonce_[kStreamNonceBytes];  // before key_, which draws it
  StreamKey key_;
  std::string head_prefix_;  // the head frame up to its ciphertext
};

// A stream whose head was opened (SecureChannel::open_head: frame, header, header tag, chunk 0,
// replay window), taking its further chunks in order.
class IncomingStream {
 public:
  IncomingStream(EnvelopeHeader header, std::string header_bytes, StreamKey key);

  const EnvelopeHeader& header() const { return header_; }
  bool complete() const { return next_ == header_.stream->chunks(); }
  // Opens the next chunk into the plaintext. Throws RejectedMessage (authenticated header):
  // Malformed for a chunk of another index or size, CiphertextTampered for one that does not
  // open; the stream is then of no further use.
  void add(const ChunkView& chunk);
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
  uint64_t next_ = 0;
};

}  // namespace fednode
