// What a node uses to talk: seal a protocol message for one peer, and open what arrives, with
// every check of docs/protocol.md ("Opening a frame") in its order. It composes protocol/ (the
// envelope header that sealing binds, the payload codec) with crypto/seal.h, which is why it
// lives in node/: crypto/ seals and opens bytes and knows nothing of payloads.
#pragma once

#include "crypto/errors.h"
#include "crypto/keys.h"
#include "crypto/replay.h"
#include "crypto/run_id.h"
#include "crypto/seal.h"
#include "protocol/codec.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace fednode {

class IncomingStream;
class SealedStream;
enum class StreamCipher : uint8_t;

// The allow list: every node this node may exchange messages with, and its public key. It comes
// from the topology; a node not in it cannot get a message accepted.
using PeerKeys = std::map<NodeId, PublicKey>;

struct RejectedMessage : SecurityError {
  RejectedMessage(SecurityCode code, const std::string& message);
  std::optional<EnvelopeHeader> header;          // set once the header decoded
  bool authenticated = false;                    // header proven to come from header->from
  std::optional<ProtocolErrorCode> protocol_code;  // for Malformed and MalformedPayload
};

// A frame that passed steps 1-4: its header, proven to come from header.from, and its payload's
// bytes as decrypted. Nothing is decoded yet.
struct OpenedFrame {
  EnvelopeHeader header;
  std::string_view plaintext;
};

// Step 5: the payload, decoded against its header. Throws RejectedMessage(MalformedPayload,
// authenticated) naming the message. The one decode a node applies, to what just arrived and to
// what its state directory gives back on a restart (node/inbox.h).
Payload decode_opened(const OpenedFrame& opened, const Limits& limits);

// seal() and open() only read the channel, so threads may share one; the ReplayGuard passed to
// open() is the caller's to serialise access to.
class SecureChannel {
 public:
  // `peers` may include this node itself (as a topology would); its key must then match
  // `identity`. Throws InputError for a mismatch and SecurityError(InvalidKey) for a peer key
  // that is a low-order point. Key agreement with every peer happens here, once.
  SecureChannel(Identity identity, NodeId self, RunId run, const PeerKeys& peers, Limits limits = {});

  NodeId id() const { return self_; }
  const PublicKey& public_key() const { return identity_.public_key(); }
  const RunId& run() const { return run_; }
  const Limits& limits() const { return limits_; }
  bool knows(NodeId peer) const { return peers_.count(peer) != 0; }

  // One frame for `to`, carrying `payload` as message `msg_id` (>= 1, strictly increasing over
  // everything this node sends in this run, across restarts). Throws InputError for an unknown
  // recipient and ProtocolError for a payload that cannot be encoded. A Knowledge payload goes as
  // knowledge; the overload below also sends it as complete.
  std::string seal(NodeId to, uint64_t msg_id, const Payload& payload, const EncodeOptions& options = {}) const;
  // The same for knowledge held outside a Payload, without copying its tensors. `type` is
  // Knowledge, or Complete for the ring's second pass (same payload, so only the header differs);
  // any other type is an InputError.
  std::string seal(NodeId to, uint64_t msg_id, const Knowledge& knowledge, const EncodeOptions& options = {},
                   MessageType type = MessageType::Knowledge) const;

  // A payload encoded already (encode_payload), as a version-1 frame: what a node stores in its
  // outbox is sealed anew at each send.
  std::string seal_encoded(NodeId to, uint64_t msg_id, MessageType type, std::string_view plaintext) const;

  // The same message as a version-2 stream (docs/protocol.md, section 12) of `chunk`-byte chunks
  // sealed with `cipher`, for a peer that said it opens that version and cipher: chunks are
  // sealed as the transport takes them (Transport::send). `plaintext` is the encoded payload.
  std::unique_ptr<SealedStream> seal_stream(NodeId to, uint64_t msg_id, MessageType type, std::string plaintext,
                                            StreamCipher cipher, uint32_t chunk) const;
  // Knowledge (as knowledge or complete), encoded chunk by chunk as the chunks are sealed
  // (SealedStream, DeferredPayload): encoding overlaps sending as well.
  std::unique_ptr<SealedStream> seal_stream(NodeId to, uint64_t msg_id, MessageType type,
                                            std::shared_ptr<const Knowledge> knowledge, const EncodeOptions& options,
                                            StreamCipher cipher, uint32_t chunk) const;

  // Opening a frame of either version. A version-1 frame, or a stream of one chunk, is opened in
  // place as open_in_place does and returned as an OpenedFrame; the head of a longer stream
  // passes the same steps (its header tag, its chunk 0, the replay window) and comes back as an
  // IncomingStream that takes the further chunks (IncomingStream::add). Throws RejectedMessage.
  std::variant<OpenedFrame, std::unique_ptr<IncomingStream>> open_head(char* frame, size_t size,
                                                                       const ReplayGuard& replay) const;

  // Steps 1-4 of opening (frame, recipient, run, sender, header tag, AEAD, replay window),
  // decrypting in the frame's own memory: no second copy of a multi-megabyte message. The frame's
  // ciphertext is overwritten (wiped, if it does not authenticate) once the header checks pass.
  // Records nothing in `replay`: the caller decodes the payload (decode_opened, step 5) and
  // records the id once it is used (ReplayGuard::accept). Throws RejectedMessage; an authentic
  // duplicate (Replayed with authenticated = true) is what a peer whose acknowledgement was lost
  // sends again: answer it with another Ack, and use nothing from it.
  OpenedFrame open_in_place(char* frame, size_t size, const ReplayGuard& replay) const;
  // Every step, for a peer that keeps nothing (tests, benchmarks): open, decode, record the id.
  // `plaintext`, when given, receives the payload's bytes as decrypted.
  Message open(std::string_view frame, ReplayGuard& replay, std::string* plaintext = nullptr) const;

 private:
  using Decrypt = std::function<std::string_view(const MessageKeys&, const EnvelopeHeader&, std::string_view header,
                                                 const SealedView&)>;
  OpenedFrame open_with(std::string_view frame, const ReplayGuard& replay, const Decrypt& decrypt) const;
  // Decryption for both versions: a version-1 ciphertext, or a stream's chunk 0, in place at
  // `text` (writable memory holding sealed.ciphertext) when it is the only chunk, and otherwise
  // into a new IncomingStream's plaintext, returned in `stream`.
  static std::string_view open_first(const MessageKeys& keys, const EnvelopeHeader& header,
                                     std::string_view header_bytes, const SealedView& sealed, char* text,
                                     std::unique_ptr<IncomingStream>* stream);
  EnvelopeHeader make_header(NodeId to, uint64_t msg_id, MessageType type) const;
  // A version-2 header: make_header's, with the stream's layout.
  EnvelopeHeader stream_header(NodeId to, uint64_t msg_id, MessageType type, uint64_t bytes, StreamCipher cipher,
                               uint32_t chunk) const;
  // The keys for sending to `to`; InputError naming it when it is not in the allow list.
  const MessageKeys& sending_keys(NodeId to) const;

  struct Peer {
    PublicKey key;
    MessageKeys send;
    MessageKeys receive;
  };
  Identity identity_;
  NodeId self_;
  RunId run_;
  Limits limits_;
  std::map<NodeId, Peer> peers_;
};

}  // namespace fednode
