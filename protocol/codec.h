// Bytes <-> messages. Decoders take untrusted input: they check every size against Limits
// before allocating, and throw ProtocolError (never anything else) for any malformed input.
// Encoders throw ProtocolError for values that cannot be represented (NaN, float16 overflow,
// shapes that disagree), so a node never sends what its peers would reject.
#pragma once

#include "core/protocol_error.h"
#include "core/limits.h"
#include "protocol/messages.h"

#include <array>
#include <memory>
#include <string>
#include <string_view>

namespace fednode {

constexpr size_t kNonceBytes = 24;      // XChaCha20-Poly1305 nonce
constexpr size_t kHeaderTagBytes = 16;  // keyed BLAKE2b over the header bytes
constexpr size_t kAeadTagBytes = 16;    // Poly1305 tag, the last bytes of the ciphertext
constexpr size_t kMaxHeaderBytes = 256;

// Header <-> its MessagePack bytes. The bytes, exactly as sent, are the associated data, so
// decoders never re-encode a header to authenticate it.
std::string encode_header(const EnvelopeHeader& header);
EnvelopeHeader decode_header(std::string_view bytes, const Limits& limits);

// One frame = one transport message: the header, its tag, the nonce and the ciphertext.
// The views of a decoded frame point into the input bytes.
struct FrameView {
  std::string_view header;
  std::string_view header_tag;  // kHeaderTagBytes
  std::string_view nonce;       // kNonceBytes
  std::string_view ciphertext;  // >= kAeadTagBytes
};
std::string encode_frame(const FrameView& frame);
// A complete frame with zeroed tag, nonce and ciphertext, and where each lies in `bytes`, so that
// a sender can seal straight into it and save a copy of a multi-megabyte message.
struct FrameLayout {
  std::string bytes;
  size_t header_tag_at = 0, nonce_at = 0, ciphertext_at = 0;
};
FrameLayout layout_frame(std::string_view header, size_t ciphertext_size);
// For a sender that encodes a large payload straight into the frame and encrypts it in place,
// which saves a buffer and a pass over a multi-megabyte message: the frame up to the ciphertext,
// whose length is left open (bytes ends at ciphertext_at; `reserve` more bytes are reserved).
// Append the plaintext and kAeadTagBytes to bytes, then close_frame() writes the length. Only a
// ciphertext of at least kMinOpenCiphertext bytes can be closed: below that, the canonical frame
// (layout_frame's) has a shorter length field than the 4 bytes left open here.
constexpr size_t kMinOpenCiphertext = 65536;
FrameLayout open_frame(std::string_view header, size_t reserve);
// True when the ciphertext (everything after ciphertext_at) was long enough and its length is
// now written; false, changing nothing, when it is shorter than kMinOpenCiphertext.
bool close_frame(FrameLayout& frame);
FrameView decode_frame(std::string_view bytes, const Limits& limits);

// Version 2 (docs/protocol.md, section 12). A stream's first transport message is a frame as
// above whose header carries the StreamLayout and whose ciphertext is chunk 0; every further
// chunk is a transport message of its own:
//   ["fednode", msg_id, index, ciphertext: the chunk's bytes then its 16-byte tag]
// The msg_id lets a receiver drop the rest of a stream it has refused or finished with.
struct ChunkView {
  uint64_t msg_id = 0;
  uint64_t index = 0;
  std::string_view ciphertext;  // >= kAeadTagBytes
};
// Everything of a chunk message before its ciphertext, whose length is `ciphertext_size`.
std::string chunk_prefix(uint64_t msg_id, uint64_t index, size_t ciphertext_size);
ChunkView decode_chunk(std::string_view bytes, const Limits& limits);
// Whether a transport message is a chunk rather than a frame (the array's length): which of the
// two decoders applies. Decoding still checks everything.
bool is_chunk_message(std::string_view bytes);
// Chunk size, total size and cipher name within their bounds.
void check_stream_layout(const StreamLayout& layout, const Limits& limits, const std::string& where);

// Payload <-> plaintext bytes. decode_payload checks the payload against the header it came
// with (type, and Hello.node against header.from).
std::string encode_payload(const Payload& payload, const EncodeOptions& options = {});
// The same for knowledge held outside a Payload: converting a Knowledge to a Payload would copy
// every tensor (tens of megabytes for FedPFT at d = 1280).
std::string encode_payload(const Knowledge& knowledge, const EncodeOptions& options = {});
// encode_payload(knowledge), appended to `out` (e.g. after an open_frame's prefix). Reserve
// encoded_payload_bound() first: growing a multi-megabyte string copies all of it.
void append_payload(std::string& out, const Knowledge& knowledge, const EncodeOptions& options = {});
// At least encode_payload(knowledge, options).size() for knowledge that encodes: a size to
// reserve (an encoding that outgrew it would still be right, only slower).
size_t encoded_payload_bound(const Knowledge& knowledge, const EncodeOptions& options = {});
Payload decode_payload(const EnvelopeHeader& header, std::string_view bytes, const Limits& limits);

// encode_payload(knowledge) for a sender that seals the bytes as they are written (a version-2
// stream): the structure is written at once and the tensors' values on demand, in message
// order, so that the first chunk goes out before the last value is converted. Keeps `knowledge`
// alive until every value is written. convert_through() throws what encode_payload would, for
// the first tensor that fails; the payload is then of no use.
class DeferredPayload {
 public:
  DeferredPayload(std::shared_ptr<const Knowledge> knowledge, const EncodeOptions& options = {});
  DeferredPayload(DeferredPayload&&) noexcept;
  DeferredPayload& operator=(DeferredPayload&&) noexcept;
  ~DeferredPayload();

  size_t size() const;
  // Writes every value that lies below `end` (on the pool from a quarter megabyte).
  void convert_through(size_t end);
  // The bytes: valid below the last convert_through's `end`.
  const char* data() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The checks decode_payload applies to knowledge, for callers that build Knowledge themselves
// (and for encode_payload): shapes, sorted labels, finiteness, counts within limits.
void validate_knowledge(const Knowledge& k, const Limits& limits, const std::string& where);

}  // namespace fednode
