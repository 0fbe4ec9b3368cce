#include "node/secure_stream.h"

#include "core/parallel.h"

#include <algorithm>
#include <cstring>

namespace fednode {

namespace {

RejectedMessage refused(SecurityCode code, const EnvelopeHeader& header, const std::string& why) {
  RejectedMessage e(code, std::string(to_string(header.type)) + " message " + std::to_string(header.msg_id) +
                              " from node " + std::to_string(header.from) + ": " + why);
  e.header = header;
  e.authenticated = true;  // the head's header tag verified
  return e;
}

}  // namespace

SealedStream::SealedStream(EnvelopeHeader header, DeferredPayload payload, const MessageKeys& keys, StreamCipher cipher)
    : SealedStream(std::move(header), std::string(), keys, cipher) {
  deferred_.emplace(std::move(payload));
}

SealedStream::SealedStream(EnvelopeHeader header, std::string plaintext, const MessageKeys& keys, StreamCipher cipher)
    : header_(std::move(header)),
      header_bytes_(encode_header(header_)),
      plaintext_(std::move(plaintext)),
      key_(StreamKey::for_sealing(keys, cipher, nonce_)) {
  // The head frame up to its ciphertext (chunk 0): header, header tag, the stream's nonce.
  FrameLayout head = layout_frame(header_bytes_, header_.stream->chunk_bytes(0) + kStreamTagBytes);
  fednode::header_tag(keys, header_bytes_, reinterpret_cast<uint8_t*>(head.bytes.data() + head.header_tag_at));
  std::memcpy(head.bytes.data() + head.nonce_at, nonce_, sizeof nonce_);
  head.bytes.resize(head.ciphertext_at);
  head_prefix_ = std::move(head.bytes);
}

size_t SealedStream::size(size_t i) const {
  const size_t ciphertext = header_.stream->chunk_bytes(i) + kStreamTagBytes;
  return (i == 0 ? head_prefix_.size() : chunk_prefix(header_.msg_id, i, ciphertext).size()) + ciphertext;
}

void SealedStream::seal_message(size_t i, std::string& out) const {
  const StreamLayout& layout = *header_.stream;
  const size_t n = layout.chunk_bytes(i);
  const std::string prefix = i == 0 ? head_prefix_ : chunk_prefix(header_.msg_id, i, n + kStreamTagBytes);
  out.resize(prefix.size() + n + kStreamTagBytes);
  std::memcpy(out.data(), prefix.data(), prefix.size());
  char* text = out.data() + prefix.size();
  const size_t at = i * size_t{layout.chunk};
  const char* plaintext = deferred_ ? deferred_->data() : plaintext_.data();
  key_.seal_chunk(i, i + 1 == layout.chunks(), header_bytes_, plaintext + at, n, text,
                  reinterpret_cast<uint8_t*>(text + n));
}

std::string SealedStream::take(size_t i) {
  if (i < batch_first_ || i >= batch_first_ + batch_.size()) {
    // Two chunks per thread: enough to keep every core busy, little sealed ahead of the wire.
    const size_t threads = static_cast<size_t>(parallel_threads());
    const size_t n = std::min(count() - i, threads == 1 ? 1 : 2 * threads);
    const StreamLayout& layout = *header_.stream;
    if (deferred_) deferred_->convert_through(std::min<uint64_t>((i + n) * uint64_t{layout.chunk}, layout.bytes));
    batch_.assign(n, std::string());
    batch_first_ = i;
    for_each_chunk(n, n > 1, [&](size_t k) { seal_message(i + k, batch_[k]); });
  }
  return std::move(batch_[i - batch_first_]);
}

IncomingStream::IncomingStream(EnvelopeHeader header, std::string header_bytes, StreamKey key)
    : header_(std::move(header)), header_bytes_(std::move(header_bytes)), key_(std::move(key)) {}

void IncomingStream::open_chunk(uint64_t index, std::string_view ciphertext, char* out) {
  const StreamLayout& layout = *header_.stream;
  const uint64_t chunks = layout.chunks();
  const size_t n = layout.chunk_bytes(index);
  if (ciphertext.size() != n + kStreamTagBytes)
    throw SecurityError(SecurityCode::Malformed, "chunk " + std::to_string(index) + " of " + std::to_string(chunks) +
                                                     " carries " + std::to_string(ciphertext.size()) +
                                                     " bytes of ciphertext, the layout says " +
                                                     std::to_string(n + kStreamTagBytes));
  if (!out) {
    if (!plaintext_) plaintext_.reset(new char[layout.bytes > 0 ? layout.bytes : 1]);
    out = plaintext_.get() + index * layout.chunk;
  }
  const auto* tag = reinterpret_cast<const uint8_t*>(ciphertext.data() + n);
  if (!key_.open_chunk(index, index + 1 == chunks, header_bytes_, ciphertext.data(), n, tag, out))
    throw SecurityError(SecurityCode::CiphertextTampered,
                        "chunk " + std::to_string(index) + " of " + std::to_string(chunks) +
                            " does not authenticate: altered, out of order, or from another message");
}

void IncomingStream::add(const ChunkView& chunk, ReceivedFrame holder) {
  const StreamLayout& layout = *header_.stream;
  if (next_ == layout.chunks()) throw refused(SecurityCode::Malformed, header_, "a chunk after the last one");
  if (chunk.msg_id != header_.msg_id || chunk.index != next_)
    throw refused(SecurityCode::Malformed, header_,
                  "expected chunk " + std::to_string(next_) + ", received chunk " + std::to_string(chunk.index) +
                      " of message " + std::to_string(chunk.msg_id));
  if (chunk.ciphertext.size() != layout.chunk_bytes(next_) + kStreamTagBytes)
    throw refused(SecurityCode::Malformed, header_,
                  "chunk " + std::to_string(next_) + " carries " + std::to_string(chunk.ciphertext.size()) +
                      " bytes of ciphertext, the layout says " +
                      std::to_string(layout.chunk_bytes(next_) + kStreamTagBytes));
  pending_.push_back(Pending{next_++, chunk.ciphertext, std::move(holder)});
  // Two chunks per thread, as the sender seals them: every core opens while the next arrive.
  const size_t threads = static_cast<size_t>(parallel_threads());
  if (pending_.size() < (threads == 1 ? 1 : 2 * threads) && next_ < layout.chunks()) return;
  if (!plaintext_) plaintext_.reset(new char[layout.bytes > 0 ? layout.bytes : 1]);  // before the threads
  try {
    for_each_chunk_ordered(pending_.size(), pending_.size() > 1, [&](size_t k) {
      open_chunk(pending_[k].index, pending_[k].ciphertext, nullptr);
    });
  } catch (const SecurityError& e) {
    pending_.clear();
    throw refused(e.code, header_, e.what());
  }
  pending_.clear();  // their buffers go back to ZeroMQ
}

OpenedFrame IncomingStream::opened() const {
  return OpenedFrame{header_, std::string_view(plaintext_.get(), complete() ? header_.stream->bytes : 0)};
}

}  // namespace fednode
