// The messages nodes exchange, as C++ values. Their byte layout is docs/protocol.md; codec.h turns
// one into the other. Every message travels sealed (node/secure_channel.h): the envelope header
// is readable by anyone on the path but authenticated; the payload is encrypted.
#pragma once

#include "methods/heads/head.h"
#include "methods/knowledge.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace fednode {

constexpr uint32_t kProtocolVersion = 1;
// Version 2 adds streams: a message sealed and sent as a sequence of chunks (docs/protocol.md,
// section 12). Its header names the stream's layout.
constexpr uint32_t kStreamVersion = 2;
// Version 3 changes no bytes: a hello that lists it promises receipts (docs/protocol.md, 5.4), so
// that its receiver waits for them before it closes, also from a sender killed before it sent any.
// No frame carries 3 in its header; frames travel as version 1 or 2.
constexpr uint32_t kReceiptsVersion = 3;
constexpr uint32_t kMinStreamChunk = 1024;
constexpr uint32_t kMaxStreamChunk = uint32_t{16} << 20;

// How a version-2 message is cut: `bytes` of plaintext in chunks of `chunk` bytes (the last one
// shorter, or empty when bytes is 0), each sealed with `cipher` (crypto/stream.h names).
struct StreamLayout {
  std::string cipher;
  uint64_t bytes = 0;
  uint32_t chunk = 0;
  uint64_t chunks() const { return bytes == 0 ? 1 : (bytes + chunk - 1) / chunk; }
  uint64_t chunk_bytes(uint64_t index) const { return index + 1 < chunks() ? chunk : bytes - index * chunk; }
  bool operator==(const StreamLayout& o) const { return cipher == o.cipher && bytes == o.bytes && chunk == o.chunk; }
};

// Complete is the ring's second pass (docs/topologies.md, "ring"): the same payload as Knowledge,
// but a distinct type, because the previous node sends both over the same link and the receiver
// must know which pass a message belongs to before it merges anything.
enum class MessageType : uint8_t {
  Hello = 1,
  Knowledge = 2,
  Head = 3,
  Ack = 4,
  Error = 5,
  Complete = 6,
  UnmaskRequest = 7,  // secure aggregation on a star: the hub names the survivors (docs/protocol.md, 5.7)
  UnmaskReply = 8,    // a survivor's answer: the seeds that let the hub read the survivors' sum (5.8)
};
const char* to_string(MessageType t);


// Travels in the clear, bound to the ciphertext as associated data.
struct EnvelopeHeader {
  uint32_t version = kProtocolVersion;
  MessageType type = MessageType::Hello;
  NodeId from = 0;
  NodeId to = 0;
  uint64_t msg_id = 0;  // >= 1, strictly increasing per sender within a run (replay protection)
  RunId run;
  std::optional<StreamLayout> stream;  // set exactly when version is kStreamVersion
};

// First message on a link: lets the peer refuse an incompatible node before any knowledge flows.
// The sender's id and the version of this very message are in the (authenticated) header.
struct Hello {
  // Every protocol version the sender speaks; a receiver ignores the ones it does not know.
  std::vector<uint32_t> versions{kProtocolVersion, kStreamVersion, kReceiptsVersion};
  NodeId node = 0;                                   // must equal header.from
  std::string method;                                // a name in methods/registry.h
  std::string backbone_fingerprint;
  int dim = 0;
  int num_classes = 0;
  std::string software;                              // e.g. "fednode 0.1.0", for logs only
};

// A trained head (star mode's answer from the hub) and whose data it saw.
struct HeadMessage {
  std::shared_ptr<const Head> head;  // of a kind some HeadCodec writes (methods/registry.h, head_codec_for)
  Contributors contributors;
  std::string backbone_fingerprint;
  // Personalised FedCGS: the class means of what the head was trained on, the alignment targets
  // of every leaf's personal head (docs/protocol.md, 5.3). Null unless the run personalises.
  std::shared_ptr<const ClassMeans> class_means;
};

struct Ack {
  uint64_t acked_id = 0;  // msg_id of the message received and stored
  // Version 2 (docs/protocol.md, 5.4): set only in acks to a peer whose hello listed version 2,
  // saying which versions and stream ciphers this node opens. Both empty, or both set.
  std::vector<uint32_t> versions;
  std::vector<std::string> ciphers;
};

enum class ErrorReason : uint16_t {
  Malformed = 1,           // the referenced message could not be decoded
  Incompatible = 2,        // method, backbone, dimension or class count differ
  UnsupportedVersion = 3,
  Rejected = 4,            // refused by policy (unknown contributor, duplicate run, ...)
  Busy = 5,                // try again later
  Shutdown = 6,            // the sender is stopping
  Timeout = 7,             // the sender gave up waiting
  Internal = 8,
};
const char* to_string(ErrorReason r);  // "unknown" for codes a newer peer may send
// The msgpack-c the wire format was built with, "4.1.3" (fednode --version).
const char* msgpack_version_text();

struct ErrorMessage {
  ErrorReason reason = ErrorReason::Internal;  // any uint16 is accepted on decode
  uint64_t ref_id = 0;   // msg_id this error answers, 0 for none
  bool abort = false;    // the sender abandons the run
  std::string text;      // human-readable detail, for logs; receivers refuse more than
                         // Limits::max_string_bytes (1024 by default)
};

// Secure aggregation's unmasking round on a star (docs/privacy.md, "Dropouts: the unmasking round"). Once its leaves'
// masked statistics are in or their deadline passed, the hub asks every leaf whose piece it holds
// (the survivors) for what removes the masks that did not cancel: each survivor's self mask, and
// the masks each shared with a leaf whose piece never came (the dropped).
using Seed32 = std::array<uint8_t, 32>;

// The round has two steps (the consistency round first): the hub asks with the split alone and
// gets every survivor's consistency tags; then it asks again with the tags addressed to the
// recipient, and gets the seeds from each survivor whose tags all match its split.
struct UnmaskRequest {
  Contributors survivors;  // non-empty, the recipient among them
  Contributors dropped;    // the rest of the mask group; may be empty
  // Empty in the first step. In the second: the tag of every other survivor to the recipient, in
  // the order of `survivors` with the recipient left out.
  std::vector<Seed32> tags;
};

struct UnmaskReply {
  Contributors survivors;  // the request answered, repeated: a restarted hub takes its decision back
  Contributors dropped;
  // A consistency answer (first step): the sender's tag to every other survivor, in the order of
  // `survivors` with the sender left out; then no seeds.
  std::vector<Seed32> tags;
  Seed32 self_seed{};                  // the sender's self-mask seed
  std::map<NodeId, Seed32> pair_seeds;  // the sender's pair seed with each dropped leaf, exactly those
  bool consistency() const { return !tags.empty(); }
};

// A Knowledge alternative travels as Knowledge or Complete: the header's type tells the two apart.
using Payload = std::variant<Hello, Knowledge, HeadMessage, Ack, ErrorMessage, UnmaskRequest, UnmaskReply>;
// The type a payload is sent as by default (Knowledge for a Knowledge, never Complete).
MessageType type_of(const Payload& p);

struct Message {
  EnvelopeHeader header;
  Payload payload;
};

// How floating-point tensors of knowledge travel. Statistics (FedCGS) always travel as float64
// and heads as float32; this chooses for GMM parameters and prototypes.
enum class Precision { Float32, Float16 };

struct EncodeOptions {
  Precision precision = Precision::Float32;
};

}  // namespace fednode
