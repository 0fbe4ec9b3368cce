// Payload dispatch, and the small control messages: hello, ack, error.
#include "protocol/wire_body_msgpack.h"
#include "protocol/payload_parts.h"
#include "protocol/tensor.h"
#include "methods/registry.h"

#include <algorithm>

namespace fednode {

using namespace wire;

namespace wire {

void pack_contributors(Packer& pk, const Contributors& c) {
  std::string unused;  // contributors hold no tensor
  TensorJobs none;
  MsgpackBodyWriter w(pk, unused, DType::F32, none);
  write_contributors(w, c);
}

void pack_origin(Packer& pk, const Contributors& contributors, const std::string& backbone, int dim, int classes) {
  pack_str(pk, "contributors");
  pack_contributors(pk, contributors);
  pack_str(pk, "backbone");
  pack_str(pk, backbone);
  pack_str(pk, "dim");
  pk.pack_uint32(static_cast<uint32_t>(dim));
  pack_str(pk, "classes");
  pk.pack_uint32(static_cast<uint32_t>(classes));
}

Contributors read_contributors(const msgpack::object& o, const std::string& path, const Limits& limits) {
  MsgpackBodyValue v(o, path);
  return fednode::read_contributors(v, limits);
}

int read_count(const msgpack::object& o, const std::string& path, uint64_t limit, const char* limit_name) {
  const uint64_t v = as_uint(o, path);
  if (v == 0) throw ProtocolError(ProtocolErrorCode::InvalidValue, path + ": must be at least 1");
  check_limit(v, limit, path, limit_name);
  return static_cast<int>(v);  // limits are capped far below INT_MAX (Limits::validate)
}

std::string read_string(const msgpack::object& o, const std::string& path) {
  return std::string(as_str(o, path));  // length bounded by max_string_bytes while parsing
}

}  // namespace wire

namespace {

constexpr uint32_t kMaxVersions = 16;

bool known_method(std::string_view m) { return find_method(m) != nullptr; }

void pack_versions(Packer& pk, const std::vector<uint32_t>& versions, const char* what) {
  if (versions.empty() || versions.size() > kMaxVersions)
    throw ProtocolError(ProtocolErrorCode::InvalidValue, std::string(what) + ": 1 to 16 protocol versions");
  pack_str(pk, "versions");
  pk.pack_array(static_cast<uint32_t>(versions.size()));
  for (uint32_t v : versions) pk.pack_uint32(v);
}

std::vector<uint32_t> read_versions(const msgpack::object& o, const std::string& path) {
  const auto& versions = as_array(o, path);
  if (versions.size == 0 || versions.size > kMaxVersions)
    throw ProtocolError(ProtocolErrorCode::InvalidValue, path + ": 1 to 16 entries, found " +
                                                             std::to_string(versions.size));
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < versions.size; ++i) {
    const uint64_t v = as_uint(versions.ptr[i], path + "[" + std::to_string(i) + "]");
    if (v == 0 || v > UINT32_MAX) throw ProtocolError(ProtocolErrorCode::InvalidValue, path + ": version " + std::to_string(v));
    out.push_back(static_cast<uint32_t>(v));
  }
  return out;
}

void pack_hello(Packer& pk, const Hello& h) {
  if (h.dim <= 0 || h.num_classes <= 0)
    throw ProtocolError(ProtocolErrorCode::InvalidValue, "hello: dim and classes must be positive");
  pk.pack_map(7);
  pack_versions(pk, h.versions, "hello");
  pack_str(pk, "node");
  pk.pack_uint32(h.node);
  pack_str(pk, "method");
  pack_str(pk, h.method);
  pack_str(pk, "backbone");
  pack_str(pk, h.backbone_fingerprint);
  pack_str(pk, "dim");
  pk.pack_uint32(static_cast<uint32_t>(h.dim));
  pack_str(pk, "classes");
  pk.pack_uint32(static_cast<uint32_t>(h.num_classes));
  pack_str(pk, "software");
  pack_str(pk, h.software);
}

Hello read_hello(const msgpack::object& o, const EnvelopeHeader& header, const Limits& limits) {
  MapReader map(o, "hello");
  Hello h;
  h.versions = read_versions(map.at("versions"), map.path("versions"));
  if (std::find(h.versions.begin(), h.versions.end(), header.version) == h.versions.end())
    throw ProtocolError(ProtocolErrorCode::InvalidValue,
                        "hello.versions: does not list version " + std::to_string(header.version) +
                            " the message itself uses");
  const uint64_t node = map.uint("node");
  if (node != header.from)
    throw ProtocolError(ProtocolErrorCode::InvalidValue,
                        "hello.node: names node " + std::to_string(node) + " but was sent by node " +
                            std::to_string(header.from));
  h.node = static_cast<NodeId>(node);
  h.method = read_string(map.at("method"), map.path("method"));
  if (!known_method(h.method))
    throw ProtocolError(ProtocolErrorCode::InvalidValue,
                        "hello.method: unknown method '" + printable(h.method) + "'");
  h.backbone_fingerprint = read_string(map.at("backbone"), map.path("backbone"));
  h.dim = read_count(map.at("dim"), map.path("dim"), limits.max_dim, "max_dim");
  h.num_classes = read_count(map.at("classes"), map.path("classes"), limits.max_classes, "max_classes");
  h.software = read_string(map.at("software"), map.path("software"));
  map.finish();
  return h;
}

void pack_ack(Packer& pk, const Ack& a) {
  if (a.acked_id == 0) throw ProtocolError(ProtocolErrorCode::InvalidValue, "ack: acked id must be at least 1");
  if (a.versions.empty() != a.ciphers.empty() || a.ciphers.size() > kMaxVersions)
    throw ProtocolError(ProtocolErrorCode::InvalidValue, "ack: versions and 1 to 16 ciphers go together");
  pk.pack_map(a.versions.empty() ? 1 : 3);
  pack_str(pk, "acked");
  pk.pack_uint64(a.acked_id);
  if (a.versions.empty()) return;
  pack_versions(pk, a.versions, "ack");
  pack_str(pk, "ciphers");
  pk.pack_array(static_cast<uint32_t>(a.ciphers.size()));
  for (const std::string& c : a.ciphers) pack_str(pk, c);
}

Ack read_ack(const msgpack::object& o) {
  MapReader map(o, "ack");
  Ack a;
  a.acked_id = map.uint("acked");
  if (a.acked_id == 0) throw ProtocolError(ProtocolErrorCode::InvalidValue, "ack.acked: must be at least 1");
  const msgpack::object* versions = map.find("versions");
  const msgpack::object* ciphers = map.find("ciphers");
  if (!versions != !ciphers)
    throw ProtocolError(ProtocolErrorCode::MissingField, "ack: versions and ciphers come together");
  if (versions) {
    a.versions = read_versions(*versions, map.path("versions"));
    const auto& list = as_array(*ciphers, map.path("ciphers"));
    if (list.size == 0 || list.size > kMaxVersions)
      throw ProtocolError(ProtocolErrorCode::InvalidValue, map.path("ciphers") + ": 1 to 16 entries, found " +
                                                               std::to_string(list.size));
    for (uint32_t i = 0; i < list.size; ++i)
      a.ciphers.push_back(read_string(list.ptr[i], map.path("ciphers") + "[" + std::to_string(i) + "]"));
  }
  map.finish();
  return a;
}

void pack_error(Packer& pk, const ErrorMessage& e) {
  pk.pack_map(4);
  pack_str(pk, "reason");
  pk.pack_uint16(static_cast<uint16_t>(e.reason));
  pack_str(pk, "ref");
  pk.pack_uint64(e.ref_id);
  pack_str(pk, "abort");
  if (e.abort) pk.pack_true(); else pk.pack_false();
  pack_str(pk, "text");
  pack_str(pk, e.text);
}

ErrorMessage read_error(const msgpack::object& o) {
  MapReader map(o, "error");
  ErrorMessage e;
  const uint64_t reason = map.uint("reason");
  if (reason > UINT16_MAX)
    throw ProtocolError(ProtocolErrorCode::InvalidValue, "error.reason: code exceeds 16 bits");
  e.reason = static_cast<ErrorReason>(reason);  // unknown codes are kept: a newer peer may send them
  e.ref_id = map.uint("ref");
  e.abort = as_bool(map.at("abort"), map.path("abort"));
  e.text = read_string(map.at("text"), map.path("text"));
  map.finish();
  return e;
}

// Node id lists of the unmasking round: strictly increasing, possibly empty.
void pack_ids(Packer& pk, const char* key, const Contributors& ids) {
  pack_str(pk, key);
  pack_contributors(pk, ids);
}

Contributors read_ids(MapReader& map, const char* key, const Limits& limits) {
  const msgpack::object& o = map.at(key);
  if (as_array(o, map.path(key)).size == 0) return {};
  return read_contributors(o, map.path(key), limits);
}

void check_split(const Contributors& survivors, const Contributors& dropped, const std::string& where) {
  if (survivors.empty()) throw ProtocolError(ProtocolErrorCode::InvalidValue, where + ".survivors: names nobody");
  for (NodeId id : dropped)
    if (survivors.count(id))
      throw ProtocolError(ProtocolErrorCode::InvalidValue,
                          where + ": node " + std::to_string(id) + " is both a survivor and dropped");
}

void pack_seed(Packer& pk, const Seed32& seed) {
  pack_bin(pk, std::string_view(reinterpret_cast<const char*>(seed.data()), seed.size()));
}

Seed32 read_seed(const msgpack::object& o, const std::string& path) {
  const std::string_view b = as_bin(o, path);
  if (b.size() != 32)
    throw ProtocolError(ProtocolErrorCode::InvalidValue, path + ": a seed is 32 bytes, found " + std::to_string(b.size()));
  Seed32 s;
  std::copy(b.begin(), b.end(), s.begin());
  return s;
}

// Consistency tags: one for every survivor but one (the recipient of a request, the sender of a
// reply), in the survivors' order.
void check_tag_count(size_t tags, const Contributors& survivors, const std::string& path) {
  if (tags + 1 != survivors.size())
    throw ProtocolError(ProtocolErrorCode::InvalidValue, path + ": " + std::to_string(tags) + " tags for " +
                                                             std::to_string(survivors.size()) +
                                                             " survivors (one for each but one)");
}

void pack_tags(Packer& pk, const std::vector<Seed32>& tags) {
  pack_str(pk, "tags");
  pk.pack_array(static_cast<uint32_t>(tags.size()));
  for (const auto& t : tags) pack_seed(pk, t);
}

std::vector<Seed32> read_tags(MapReader& map, const Contributors& survivors) {
  const auto& array = as_array(map.at("tags"), map.path("tags"));
  // Empty, it would read as a step without tags: a reply as seeds that are not there.
  if (array.size == 0)
    throw ProtocolError(ProtocolErrorCode::InvalidValue,
                        map.path("tags") + ": empty (the consistency step needs two survivors or more)");
  check_tag_count(array.size, survivors, map.path("tags"));
  std::vector<Seed32> tags;
  for (uint32_t i = 0; i < array.size; ++i)
    tags.push_back(read_seed(array.ptr[i], map.path("tags") + "[" + std::to_string(i) + "]"));
  return tags;
}

void pack_unmask_request(Packer& pk, const UnmaskRequest& r) {
  check_split(r.survivors, r.dropped, "unmask request");
  if (!r.tags.empty()) check_tag_count(r.tags.size(), r.survivors, "unmask request.tags");
  pk.pack_map(r.tags.empty() ? 2 : 3);
  pack_ids(pk, "survivors", r.survivors);
  pack_ids(pk, "dropped", r.dropped);
  if (!r.tags.empty()) pack_tags(pk, r.tags);
}

UnmaskRequest read_unmask_request(const msgpack::object& o, const Limits& limits) {
  MapReader map(o, "unmask request");
  UnmaskRequest r;
  r.survivors = read_ids(map, "survivors", limits);
  r.dropped = read_ids(map, "dropped", limits);
  check_split(r.survivors, r.dropped, "unmask request");
  if (map.find("tags")) r.tags = read_tags(map, r.survivors);
  map.finish();
  return r;
}

void pack_unmask_reply(Packer& pk, const UnmaskReply& r) {
  check_split(r.survivors, r.dropped, "unmask reply");
  if (r.consistency()) {
    check_tag_count(r.tags.size(), r.survivors, "unmask reply.tags");
    pk.pack_map(3);
    pack_ids(pk, "survivors", r.survivors);
    pack_ids(pk, "dropped", r.dropped);
    pack_tags(pk, r.tags);
    return;
  }
  Contributors named;
  for (const auto& entry : r.pair_seeds) named.insert(entry.first);
  if (named != r.dropped)
    throw ProtocolError(ProtocolErrorCode::InvalidValue, "unmask reply: pair seeds must be for exactly the dropped");
  pk.pack_map(4);
  pack_ids(pk, "survivors", r.survivors);
  pack_ids(pk, "dropped", r.dropped);
  pack_str(pk, "self");
  pack_seed(pk, r.self_seed);
  pack_str(pk, "pairs");
  pk.pack_array(static_cast<uint32_t>(r.pair_seeds.size()));
  for (const auto& [id, seed] : r.pair_seeds) pack_seed(pk, seed);  // in the order of `dropped`
}

UnmaskReply read_unmask_reply(const msgpack::object& o, const Limits& limits) {
  MapReader map(o, "unmask reply");
  UnmaskReply r;
  r.survivors = read_ids(map, "survivors", limits);
  r.dropped = read_ids(map, "dropped", limits);
  check_split(r.survivors, r.dropped, "unmask reply");
  if (map.find("tags")) {
    r.tags = read_tags(map, r.survivors);
    map.finish();  // a consistency answer carries no seeds
    return r;
  }
  r.self_seed = read_seed(map.at("self"), map.path("self"));
  const auto& pairs = as_array(map.at("pairs"), map.path("pairs"));
  if (pairs.size != r.dropped.size())
    throw ProtocolError(ProtocolErrorCode::InvalidValue, map.path("pairs") + ": " + std::to_string(pairs.size) +
                                                             " seeds for " + std::to_string(r.dropped.size()) +
                                                             " dropped nodes");
  uint32_t i = 0;
  for (NodeId id : r.dropped) {
    r.pair_seeds[id] = read_seed(pairs.ptr[i], map.path("pairs") + "[" + std::to_string(i) + "]");
    ++i;
  }
  map.finish();
  return r;
}

}  // namespace

std::string encode_payload(const Payload& payload, const EncodeOptions& options) {
  if (auto* k = std::get_if<Knowledge>(&payload)) return encode_payload(*k, options);
  std::string out;
  StringSink sink{&out};
  Packer pk(sink);
  std::visit(
      [&](const auto& p) {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, Hello>) pack_hello(pk, p);
        else if constexpr (std::is_same_v<T, HeadMessage>) pack_head(pk, out, p);
        else if constexpr (std::is_same_v<T, Ack>) pack_ack(pk, p);
        else if constexpr (std::is_same_v<T, ErrorMessage>) pack_error(pk, p);
        else if constexpr (std::is_same_v<T, UnmaskRequest>) pack_unmask_request(pk, p);
        else if constexpr (std::is_same_v<T, UnmaskReply>) pack_unmask_reply(pk, p);
      },
      payload);
  return out;
}

// Reserving this much means encoding never reallocates: a reallocation near the end of a
// multi-megabyte payload copies all of it into a buffer twice its size. Beyond the tensor bytes,
// each per-class entry costs about 175 bytes of MessagePack keys and tensor headers (FedPFT) and
// each contributor up to 5; the rest is well under 4 KiB.
size_t encoded_payload_bound(const Knowledge& k, const EncodeOptions& options) {
  const MethodDescriptor& sender = method_named(k.method_name());
  const size_t entries = sender.codec ? sender.codec->entries(k) : 0;
  return static_cast<size_t>(k.payload_bytes(options.precision == Precision::Float16)) + 4096 + 256 * entries +
         5 * k.contributors.size() + k.backbone_fingerprint.size();
}

std::string encode_payload(const Knowledge& knowledge, const EncodeOptions& options) {
  std::string out;
  out.reserve(encoded_payload_bound(knowledge, options));
  append_payload(out, knowledge, options);
  return out;
}

struct DeferredPayload::Impl {
  std::shared_ptr<const Knowledge> knowledge;
  std::string bytes;  // never moves: the jobs write into it
  TensorJobs jobs;
};

DeferredPayload::DeferredPayload(std::shared_ptr<const Knowledge> knowledge, const EncodeOptions& options)
    : impl_(std::make_unique<Impl>()) {
  if (!knowledge) throw InputError("DeferredPayload: no knowledge");
  impl_->knowledge = std::move(knowledge);
  impl_->bytes.reserve(encoded_payload_bound(*impl_->knowledge, options));
  StringSink sink{&impl_->bytes};
  Packer pk(sink);
  pack_knowledge(pk, impl_->bytes, *impl_->knowledge, options, &impl_->jobs);
}

DeferredPayload::DeferredPayload(DeferredPayload&&) noexcept = default;
DeferredPayload& DeferredPayload::operator=(DeferredPayload&&) noexcept = default;
DeferredPayload::~DeferredPayload() = default;

size_t DeferredPayload::size() const { return impl_->bytes.size(); }

void DeferredPayload::convert_through(size_t end) { impl_->jobs.run_through(end); }

const char* DeferredPayload::data() const { return impl_->bytes.data(); }

void append_payload(std::string& out, const Knowledge& knowledge, const EncodeOptions& options) {
  StringSink sink{&out};
  Packer pk(sink);
  pack_knowledge(pk, out, knowledge, options);
}

Payload decode_payload(const EnvelopeHeader& header, std::string_view bytes, const Limits& limits) {
  Document doc(bytes, limits, std::string(to_string(header.type)) + " payload");
  switch (header.type) {
    case MessageType::Hello: return read_hello(doc.root(), header, limits);
    case MessageType::Knowledge:
    case MessageType::Complete: return read_knowledge(doc.root(), limits);
    case MessageType::Head: return read_head(doc.root(), limits);
    case MessageType::Ack: return read_ack(doc.root());
    case MessageType::Error: return read_error(doc.root());
    case MessageType::UnmaskRequest: return read_unmask_request(doc.root(), limits);
    case MessageType::UnmaskReply: return read_unmask_reply(doc.root(), limits);
  }
  throw ProtocolError(ProtocolErrorCode::UnknownMessageType,
                      "payload: unknown message type " + std::to_string(static_cast<int>(header.type)));
}

}  // namespace fednode
