#include "node/secure_channel.h"

#include "node/secure_stream.h"

#include <sodium.h>

#include <array>
#include <cstring>

namespace fednode {

RejectedMessage::RejectedMessage(SecurityCode code, const std::string& message) : SecurityError(code, message) {}

SecureChannel::SecureChannel(Identity identity, NodeId self, RunId run, const PeerKeys& peers, Limits limits)
    : identity_(std::move(identity)), self_(self), run_(run), limits_(limits) {
  limits_.validate();
  for (const auto& [id, key] : peers) {
    if (id == self_) {
      if (key != identity_.public_key())
        throw InputError("the allow list gives node " + std::to_string(id) + " the public key " + key.to_hex() +
                         ", but this node's identity has " + identity_.public_key().to_hex());
      continue;
    }
    peers_.emplace(id, Peer{key, MessageKeys::for_sending(identity_, key), MessageKeys::for_receiving(identity_, key)});
  }
}

std::string SecureChannel::seal(NodeId to, uint64_t msg_id, const Payload& payload,
                                const EncodeOptions& options) const {
  if (auto* k = std::get_if<Knowledge>(&payload)) return seal(to, msg_id, *k, options);
  return seal_encoded(to, msg_id, type_of(payload), encode_payload(payload, options));
}

std::string SecureChannel::seal(NodeId to, uint64_t msg_id, const Knowledge& knowledge,
                                const EncodeOptions& options, MessageType type) const {
  if (type != MessageType::Knowledge && type != MessageType::Complete)
    throw InputError(std::string("cannot seal knowledge as a ") + to_string(type) +
                     " message: knowledge travels as knowledge or complete");
  const MessageKeys& keys = sending_keys(to);
  // Knowledge is what gets large (5 MB for FedPFT at C = 100, d = 1280): it is encoded straight
  // into the frame and encrypted where it lies, so the message exists once, not as a plaintext
  // and then a frame.
  const std::string header_bytes = encode_header(make_header(to, msg_id, type));
  FrameLayout frame = open_frame(header_bytes, encoded_payload_bound(knowledge, options) + kSealAeadTagBytes);
  append_payload(frame.bytes, knowledge, options);
  const size_t plaintext_size = frame.bytes.size() - frame.ciphertext_at;
  frame.bytes.append(kSealAeadTagBytes, '\0');
  if (!close_frame(frame))  // too small for the open frame's length field: lay it out again
    return seal_encoded(to, msg_id, type, frame.bytes.substr(frame.ciphertext_at, plaintext_size));
  char* base = frame.bytes.data();
  seal_in_place(keys, header_bytes, base + frame.ciphertext_at, plaintext_size,
                reinterpret_cast<uint8_t*>(base + frame.nonce_at), reinterpret_cast<uint8_t*>(base + frame.header_tag_at));
  return std::move(frame.bytes);
}

EnvelopeHeader SecureChannel::make_header(NodeId to, uint64_t msg_id, MessageType type) const {
  EnvelopeHeader header;
  header.type = type;
  header.from = self_;
  header.to = to;
  header.msg_id = msg_id;
  header.run = run_;
  return header;
}

const MessageKeys& SecureChannel::sending_keys(NodeId to) const {
  const auto it = peers_.find(to);
  if (it == peers_.end()) throw InputError("cannot send to node " + std::to_string(to) + ": not in the allow list");
  return it->second.send;
}

EnvelopeHeader SecureChannel::stream_header(NodeId to, uint64_t msg_id, MessageType type, uint64_t bytes,
                                            StreamCipher cipher, uint32_t chunk) const {
  EnvelopeHeader header = make_header(to, msg_id, type);
  header.version = kStreamVersion;
  header.stream = StreamLayout{to_string(cipher), bytes, chunk};
  return header;
}

std::string SecureChannel::seal_encoded(NodeId to, uint64_t msg_id, MessageType type,
                                        std::string_view plaintext) const {
  const MessageKeys& keys = sending_keys(to);
  const std::string header_bytes = encode_header(make_header(to, msg_id, type));
  // The ciphertext is written straight into the frame: no copy of a multi-megabyte message.
  FrameLayout frame = layout_frame(header_bytes, plaintext.size() + kSealAeadTagBytes);
  char* base = frame.bytes.data();
  seal_into(keys, header_bytes, plaintext, reinterpret_cast<uint8_t*>(base + frame.nonce_at),
            reinterpret_cast<uint8_t*>(base + frame.header_tag_at), base + frame.ciphertext_at);
  return std::move(frame.bytes);
}

std::unique_ptr<SealedStream> SecureChannel::seal_stream(NodeId to, uint64_t msg_id, MessageType type,
                                                         std::string plaintext, StreamCipher cipher,
                                                         uint32_t chunk) const {
  const MessageKeys& keys = sending_keys(to);
  EnvelopeHeader header = stream_header(to, msg_id, type, plaintext.size(), cipher, chunk);
  return std::make_unique<SealedStream>(std::move(header), std::move(plaintext), keys, cipher);
}

std::unique_ptr<SealedStream> SecureChannel::seal_stream(NodeId to, uint64_t msg_id, MessageType type,
                                                         std::shared_ptr<const Knowledge> knowledge,
                                                         const EncodeOptions& options, StreamCipher cipher,
                                                         uint32_t chunk) const {
  if (type != MessageType::Knowledge && type != MessageType::Complete)
    throw InputError(std::string("cannot seal knowledge as a ") + to_string(type) +
                     " message: knowledge travels as knowledge or complete");
  const MessageKeys& keys = sending_keys(to);
  DeferredPayload payload(std::move(knowledge), options);
  EnvelopeHeader header = stream_header(to, msg_id, type, payload.size(), cipher, chunk);
  return std::make_unique<SealedStream>(std::move(header), std::move(payload), keys, cipher);
}

std::string_view SecureChannel::open_first(const MessageKeys& keys, const EnvelopeHeader& header,
                                           std::string_view header_bytes, const SealedView& sealed, char* text,
                                           std::unique_ptr<IncomingStream>* stream) {
  if (!header.stream) return fednode::open_in_place(keys, header_bytes, sealed, text);
  check_header_tag(keys, header_bytes, sealed.header_tag);
  const StreamLayout& layout = *header.stream;
  const auto cipher = stream_cipher_named(layout.cipher);
  if (!cipher || !stream_cipher_available(*cipher))
    throw SecurityError(SecurityCode::Malformed, "the stream is sealed with " + layout.cipher +
                                                     ", which this node does not open");
  StreamKey key = StreamKey::for_opening(keys, *cipher, reinterpret_cast<const uint8_t*>(sealed.nonce.data()));
  if (layout.chunks() == 1) {
    auto incoming = IncomingStream(header, std::string(header_bytes), std::move(key));
    incoming.open_chunk(0, sealed.ciphertext, text);
    return {text, sealed.ciphertext.size() - kSealAeadTagBytes};
  }
  if (!stream) throw SecurityError(SecurityCode::Malformed, "a stream of " + std::to_string(layout.chunks()) +
                                                                " chunks cannot be opened as one frame");
  *stream = std::make_unique<IncomingStream>(header, std::string(header_bytes), std::move(key));
  (*stream)->open_chunk(0, sealed.ciphertext, nullptr);
  (*stream)->next_ = 1;
  return {};
}

std::variant<OpenedFrame, std::unique_ptr<IncomingStream>> SecureChannel::open_head(char* frame, size_t size,
                                                                                    const ReplayGuard& replay) const {
  std::unique_ptr<IncomingStream> stream;
  OpenedFrame opened = open_with({frame, size}, replay,
                                 [&](const MessageKeys& keys, const EnvelopeHeader& header, std::string_view header_bytes,
                                     const SealedView& sealed) {
                                   char* text = frame + (sealed.ciphertext.data() - frame);
                                   return open_first(keys, header, header_bytes, sealed, text, &stream);
                                 });
  if (stream) return stream;
  return opened;
}

Message SecureChannel::open(std::string_view frame, ReplayGuard& replay, std::string* plaintext_out) const {
  std::string plaintext;
  std::string copy;
  OpenedFrame opened = open_with(frame, replay, [&](const MessageKeys& keys, const EnvelopeHeader& header,
                                                    std::string_view header_bytes, const SealedView& sealed) {
    if (!header.stream) {
      plaintext = fednode::open(keys, header_bytes, sealed);
    } else {  // a stream of one chunk; a longer one is refused
      copy.assign(sealed.ciphertext);
      const std::string_view p = open_first(keys, header, header_bytes, sealed, copy.data(), nullptr);
      plaintext.assign(p);
    }
    return std::string_view(plaintext);
  });
  Message message;
  message.header = opened.header;
  message.payload = decode_opened(opened, limits_);
  replay.accept(opened.header.from, opened.header.msg_id);
  if (plaintext_out) *plaintext_out = std::move(plaintext);
  return message;
}

OpenedFrame SecureChannel::open_in_place(char* frame, size_t size, const ReplayGuard& replay) const {
  return open_with({frame, size}, replay, [&](const MessageKeys& keys, const EnvelopeHeader& header,
                                              std::string_view header_bytes, const SealedView& sealed) {
    return open_first(keys, header, header_bytes, sealed, frame + (sealed.ciphertext.data() - frame), nullptr);
  });
}

namespace {
std::string describe(const EnvelopeHeader& header) {
  return std::string(to_string(header.type)) + " message " + std::to_string(header.msg_id) + " from node " +
         std::to_string(header.from);
}

RejectedMessage rejection(SecurityCode code, const std::string& why, const std::optional<EnvelopeHeader>& header,
                          bool authenticated, std::optional<ProtocolErrorCode> protocol_code = std::nullopt) {
  RejectedMessage e(code, why);
  e.header = header;
  e.authenticated = authenticated;
  e.protocol_code = protocol_code;
  return e;
}
}  // namespace

Payload decode_opened(const OpenedFrame& opened, const Limits& limits) {
  try {
    return decode_payload(opened.header, opened.plaintext, limits);
  } catch (const ProtocolError& e) {
    throw rejection(SecurityCode::MalformedPayload, describe(opened.header) + ": " + e.what(), opened.header, true, e.code);
  }
}

OpenedFrame SecureChannel::open_with(std::string_view frame_bytes, const ReplayGuard& replay,
                                     const Decrypt& decrypt) const {
  const auto reject = [](SecurityCode code, const std::string& why, const std::optional<EnvelopeHeader>& header,
                         bool authenticated, std::optional<ProtocolErrorCode> protocol_code = std::nullopt) {
    return rejection(code, why, header, authenticated, protocol_code);
  };

  // 1. Frame and header: structure only, nothing trusted yet.
  FrameView frame;
  EnvelopeHeader header;
  try {
    frame = decode_frame(frame_bytes, limits_);
    header = decode_header(frame.header, limits_);
  } catch (const ProtocolError& e) {
    throw reject(e.code == ProtocolErrorCode::UnsupportedVersion ? SecurityCode::UnsupportedVersion
                                                                  : SecurityCode::Malformed,
                 e.what(), std::nullopt, false, e.code);
  }
  const std::string who = describe(header);

  // 2. Claims in the header that make the message none of our business. Cheap, and refusing
  //    here spends no key agreement or MAC on traffic meant for someone else.
  if (header.to != self_)
    throw reject(SecurityCode::WrongRecipient, who + " is addressed to node " + std::to_string(header.to) +
                                                   ", this is node " + std::to_string(self_),
                 header, false);
  if (header.run != run_)
    throw reject(SecurityCode::WrongRun, who + " belongs to run " + header.run.to_hex() + ", this run is " +
                                             run_.to_hex(),
                 header, false);
  if (header.from == self_)
    throw reject(SecurityCode::UnknownSender, who + ": claims to come from this node itself", header, false);
  const auto peer = peers_.find(header.from);
  if (peer == peers_.end())
    throw reject(SecurityCode::UnknownSender, who + ": node " + std::to_string(header.from) +
                                                  " is not in the allow list",
                 header, false);

  // 3. Authenticity: header tag, then the AEAD over the payload with the header as associated data.
  std::string_view plaintext;
  try {
    plaintext = decrypt(peer->second.receive, header, frame.header, {frame.nonce, frame.header_tag, frame.ciphertext});
  } catch (const SecurityError& e) {
    throw reject(e.code, who + ": " + e.what(), header, false);
  }

  // 4. Freshness, now that the id is known to be the sender's.
  const ReplayVerdict verdict = replay.check(header.from, header.msg_id);
  if (verdict != ReplayVerdict::Fresh)
    throw reject(SecurityCode::Replayed,
                 who + " was refused as a replay (" + to_string(verdict) + "; highest accepted id " +
                     std::to_string(replay.highest(header.from)) + ")",
                 header, true);

  // 5. The payload itself is the caller's (decode_opened), and so is recording the id.
  return OpenedFrame{header, plaintext};
}

}  // namespace fednode
