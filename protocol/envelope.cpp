// The envelope: header and frame encoding (docs/protocol.md, "Frame" and "Header").
#include "protocol/codec.h"
#include "protocol/msgpack_io.h"

#include <cstring>

namespace fednode {

using namespace wire;

namespace {
constexpr std::string_view kFrameMagic = "fednode";

[[noreturn]] void invalid(const std::string& message) {
  throw ProtocolError(ProtocolErrorCode::InvalidValue, message);
}
}  // namespace

std::string encode_header(const EnvelopeHeader& h) {
  if (h.msg_id == 0) invalid("header: msg_id must be at least 1");
  if ((h.version == kStreamVersion) != h.stream.has_value())
    invalid("header: a stream layout goes with version 2, and only with it");
  if (h.version != kProtocolVersion && h.version != kStreamVersion)
    invalid("header: cannot encode protocol version " + std::to_string(h.version));
  if (h.stream) check_stream_layout(*h.stream, Limits{}, "header");
  std::string out;
  StringSink sink{&out};
  Packer pk(sink);
  pk.pack_map(h.stream ? 9 : 6);
  pack_str(pk, "version");
  pk.pack_uint32(h.version);
  pack_str(pk, "type");
  pk.pack_uint8(static_cast<uint8_t>(h.type));
  pack_str(pk, "from");
  pk.pack_uint32(h.from);
  pack_str(pk, "to");
  pk.pack_uint32(h.to);
  pack_str(pk, "msg_id");
  pk.pack_uint64(h.msg_id);
  pack_str(pk, "run");
  pack_bin(pk, std::string_view(reinterpret_cast<const char*>(h.run.bytes.data()), h.run.bytes.size()));
  if (h.stream) {
    pack_str(pk, "cipher");
    pack_str(pk, h.stream->cipher);
    pack_str(pk, "bytes");
    pk.pack_uint64(h.stream->bytes);
    pack_str(pk, "chunk");
    pk.pack_uint32(h.stream->chunk);
  }
  return out;
}

EnvelopeHeader decode_header(std::string_view bytes, const Limits& limits) {
  check_limit(bytes.size(), kMaxHeaderBytes, "header", "256 bytes");
  Document doc(bytes, limits, "header");
  MapReader map(doc.root(), "header");
  EnvelopeHeader h;
  // The version decides how to read everything else, so it is checked first.
  const uint64_t version = map.uint("version");
  if (version != kProtocolVersion && version != kStreamVersion)
    throw ProtocolError(ProtocolErrorCode::UnsupportedVersion,
                        "header: protocol version " + std::to_string(version) + ", this node speaks 1 and 2");
  h.version = static_cast<uint32_t>(version);
  const uint64_t type = map.uint("type");
  if (type < 1 || type > static_cast<uint8_t>(MessageType::UnmaskReply))
    throw ProtocolError(ProtocolErrorCode::UnknownMessageType,
                        "header.type: unknown message type " + std::to_string(type));
  h.type = static_cast<MessageType>(type);
  const uint64_t from = map.uint("from"), to = map.uint("to");
  if (from > UINT32_MAX) invalid("header.from: node id " + std::to_string(from) + " exceeds 32 bits");
  if (to > UINT32_MAX) invalid("header.to: node id " + std::to_string(to) + " exceeds 32 bits");
  h.from = static_cast<NodeId>(from);
  h.to = static_cast<NodeId>(to);
  h.msg_id = map.uint("msg_id");
  if (h.msg_id == 0) invalid("header.msg_id: must be at least 1");
  const std::string_view run = as_bin(map.at("run"), "header.run");
  if (run.size() != h.run.bytes.size())
    invalid("header.run: expected 16 bytes, found " + std::to_string(run.size()));
  std::memcpy(h.run.bytes.data(), run.data(), run.size());
  if (version == kStreamVersion) {
    StreamLayout layout;
    layout.cipher = std::string(as_str(map.at("cipher"), "header.cipher"));
    layout.bytes = map.uint("bytes");
    const uint64_t chunk = map.uint("chunk");
    if (chunk > kMaxStreamChunk) invalid("header.chunk: " + std::to_string(chunk) + " bytes, above 16 MiB");
    layout.chunk = static_cast<uint32_t>(chunk);
    check_stream_layout(layout, limits, "header");
    h.stream = std::move(layout);
  }
  map.finish();
  return h;
}

void check_stream_layout(const StreamLayout& layout, const Limits& limits, const std::string& where) {
  if (layout.chunk < kMinStreamChunk || layout.chunk > kMaxStreamChunk)
    invalid(where + ".chunk: " + std::to_string(layout.chunk) + " bytes, outside 1 KiB ... 16 MiB");
  check_limit(layout.bytes, limits.max_message_bytes, where + ".bytes", "max_message_bytes");
  if (layout.cipher.empty() || layout.cipher.size() > 32)
    invalid(where + ".cipher: a name of 1 to 32 bytes, found " + std::to_string(layout.cipher.size()));
}

namespace {

// Everything before the ciphertext, its length field written for `length_field` bytes.
FrameLayout frame_prefix(std::string_view header, size_t length_field, size_t reserve) {
  if (header.size() > kMaxHeaderBytes) invalid("frame: header longer than 256 bytes");
  FrameLayout f;
  f.bytes.reserve(header.size() + reserve + 64);
  StringSink sink{&f.bytes};
  Packer pk(sink);
  pk.pack_array(5);
  pack_str(pk, kFrameMagic);
  pack_bin(pk, header);
  pk.pack_bin(kHeaderTagBytes);
  f.header_tag_at = f.bytes.size();
  f.bytes.append(kHeaderTagBytes, '\0');
  pk.pack_bin(kNonceBytes);
  f.nonce_at = f.bytes.size();
  f.bytes.append(kNonceBytes, '\0');
  pk.pack_bin(static_cast<uint32_t>(length_field));
  f.ciphertext_at = f.bytes.size();
  return f;
}

}  // namespace

FrameLayout layout_frame(std::string_view header, size_t ciphertext_size) {
  if (ciphertext_size < kAeadTagBytes) invalid("frame: ciphertext shorter than its tag");
  if (ciphertext_size > UINT32_MAX) invalid("frame: ciphertext exceeds 4 GiB");
  FrameLayout f = frame_prefix(header, ciphertext_size, ciphertext_size);
  f.bytes.append(ciphertext_size, '\0');
  return f;
}

// MessagePack writes every binary of 65536 bytes or more as bin 32 (0xc6, then the length in 4
// big-endian bytes): packing kMinOpenCiphertext gives the prefix of any such frame, and closing
// only has to overwrite those 4 bytes.
FrameLayout open_frame(std::string_view header, size_t reserve) {
  return frame_prefix(header, kMinOpenCiphertext, reserve);
}

bool close_frame(FrameLayout& f) {
  const size_t size = f.bytes.size() - f.ciphertext_at;
  if (size < kMinOpenCiphertext) return false;
  if (size > UINT32_MAX) invalid("frame: ciphertext exceeds 4 GiB");
  char* length = f.bytes.data() + f.ciphertext_at - 4;
  for (int i = 0; i < 4; ++i) length[i] = static_cast<char>((size >> (8 * (3 - i))) & 0xFF);
  return true;
}

std::string encode_frame(const FrameView& f) {
  if (f.header_tag.size() != kHeaderTagBytes) invalid("frame: header tag must be 16 bytes");
  if (f.nonce.size() != kNonceBytes) invalid("frame: nonce must be 24 bytes");
  FrameLayout layout = layout_frame(f.header, f.ciphertext.size());
  layout.bytes.replace(layout.header_tag_at, kHeaderTagBytes, f.header_tag);
  layout.bytes.replace(layout.nonce_at, kNonceBytes, f.nonce);
  layout.bytes.replace(layout.ciphertext_at, f.ciphertext.size(), f.ciphertext);
  return std::move(layout.bytes);
}

namespace {

// Frames and chunks are arrays that start with "fednode": `what` names which, `layout` its elements.
const msgpack::object_array& fednode_array(const Document& doc, uint32_t elements, const std::string& what,
                                           const char* layout) {
  const auto& parts = as_array(doc.root(), what);
  if (parts.size != elements || parts.ptr[0].type != msgpack::type::STR ||
      as_str(parts.ptr[0], what + "[0]") != kFrameMagic)
    throw ProtocolError(ProtocolErrorCode::Malformed,
                        what + ": not a fednode " + what + " (expected [\"fednode\", " + layout + "])");
  return parts;
}

// A sealed text (a frame's ciphertext, a chunk's) ends with its 16-byte tag.
void expect_tag_room(std::string_view sealed, const char* path) {
  if (sealed.size() < kAeadTagBytes)
    invalid(std::string(path) + ": " + std::to_string(sealed.size()) +
            " bytes, shorter than the 16-byte authentication tag");
}

}  // namespace

FrameView decode_frame(std::string_view bytes, const Limits& limits) {
  Document doc(bytes, limits, "frame");
  const auto& parts = fednode_array(doc, 5, "frame", "header, tag, nonce, ciphertext");
  FrameView f;
  f.header = as_bin(parts.ptr[1], "frame.header");
  f.header_tag = as_bin(parts.ptr[2], "frame.header_tag");
  f.nonce = as_bin(parts.ptr[3], "frame.nonce");
  f.ciphertext = as_bin(parts.ptr[4], "frame.ciphertext");
  check_limit(f.header.size(), kMaxHeaderBytes, "frame.header", "256 bytes");
  if (f.header_tag.size() != kHeaderTagBytes)
    invalid("frame.header_tag: expected 16 bytes, found " + std::to_string(f.header_tag.size()));
  if (f.nonce.size() != kNonceBytes)
    invalid("frame.nonce: expected 24 bytes, found " + std::to_string(f.nonce.size()));
  expect_tag_room(f.ciphertext, "frame.ciphertext");
  return f;
}

std::string chunk_prefix(uint64_t msg_id, uint64_t index, size_t ciphertext_size) {
  if (ciphertext_size < kAeadTagBytes) invalid("chunk: ciphertext shorter than its tag");
  if (ciphertext_size > UINT32_MAX) invalid("chunk: ciphertext exceeds 4 GiB");
  std::string out;
  StringSink sink{&out};
  Packer pk(sink);
  pk.pack_array(4);
  pack_str(pk, kFrameMagic);
  pk.pack_uint64(msg_id);
  pk.pack_uint64(index);
  pk.pack_bin(static_cast<uint32_t>(ciphertext_size));
  return out;
}

bool is_chunk_message(std::string_view bytes) {
  return !bytes.empty() && static_cast<uint8_t>(bytes[0]) == 0x94;  // fixarray of 4
}

ChunkView decode_chunk(std::string_view bytes, const Limits& limits) {
  Document doc(bytes, limits, "chunk");
  const auto& parts = fednode_array(doc, 4, "chunk", "msg_id, index, ciphertext");
  ChunkView c;
  c.msg_id = as_uint(parts.ptr[1], "chunk.msg_id");
  c.index = as_uint(parts.ptr[2], "chunk.index");
  c.ciphertext = as_bin(parts.ptr[3], "chunk.ciphertext");
  if (c.msg_id == 0) invalid("chunk.msg_id: must be at least 1");
  expect_tag_room(c.ciphertext, "chunk.ciphertext");
  return c;
}

}  // namespace fednode
