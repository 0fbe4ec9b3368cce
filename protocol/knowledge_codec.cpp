// Knowledge on the wire (docs/protocol.md 5.2): the header every kind shares (method, contributors,
// backbone, dim, classes), and a body that the sending method's codec writes and reads
// (MethodDescriptor::codec, methods/wire_body.h) through protocol/'s bounded MessagePack. No kind
// has code here.
#include "methods/registry.h"
#include "protocol/payload_parts.h"
#include "protocol/tensor.h"
#include "protocol/wire_body_msgpack.h"

#include <algorithm>
#include <string>

namespace fednode {

using namespace wire;

namespace {

const KnowledgeCodec& codec_of(const MethodDescriptor& m) {
  if (!m.codec) throw std::logic_error("method " + m.name + " names no knowledge codec");
  return *m.codec;
}
const KnowledgeCodec& codec_of(const Knowledge& k) { return codec_of(method_named(k.method_name())); }

void check_structure(const Knowledge& k, const std::string& where, bool check_values) {
  if (k.dim < 1) wire_fail(ProtocolErrorCode::InvalidValue, where + ": dim must be at least 1");
  if (k.num_classes < 1) wire_fail(ProtocolErrorCode::InvalidValue, where + ": classes must be at least 1");
  if (k.contributors.empty()) wire_fail(ProtocolErrorCode::InvalidValue, where + ": names no contributors");
  codec_of(k).check(k, where, check_values);
}

}  // namespace

void validate_knowledge(const Knowledge& k, const Limits& limits, const std::string& where) {
  check_limit(static_cast<uint64_t>(std::max(k.dim, 0)), limits.max_dim, where + ".dim", "max_dim");
  check_limit(static_cast<uint64_t>(std::max(k.num_classes, 0)), limits.max_classes, where + ".classes",
              "max_classes");
  check_limit(k.contributors.size(), limits.max_contributors, where + ".contributors", "max_contributors");
  check_limit(k.backbone_fingerprint.size(), limits.max_string_bytes, where + ".backbone", "max_string_bytes");
  uint64_t samples = 0;
  codec_of(k).bound(k, limits, where, samples);
  check_structure(k, where, true);
}

namespace wire {

void pack_knowledge(Packer& pk, std::string& out, const Knowledge& k, const EncodeOptions& options,
                    TensorJobs* deferred) {
  check_structure(k, "knowledge", false);  // the tensors' conversion refuses NaN/Inf
  const DType floats = options.precision == Precision::Float16 ? DType::F16 : DType::F32;
  pk.pack_map(6);
  pack_str(pk, "method");
  pack_str(pk, k.method_name());
  pack_origin(pk, k.contributors, k.backbone_fingerprint, k.dim, k.num_classes);
  pack_str(pk, "body");
  // The values are converted after the structure is written, together on the pool (TensorJobs).
  TensorJobs local;
  TensorJobs& jobs = deferred ? *deferred : local;
  MsgpackBodyWriter body(pk, out, floats, jobs);
  codec_of(k).write(k, body);
  if (!deferred) local.run();
}

Knowledge read_knowledge(const msgpack::object& o, const Limits& limits) {
  MapReader map(o, "knowledge");
  Knowledge k;
  const std::string method = read_string(map.at("method"), map.path("method"));
  const MethodDescriptor* sender = find_method(method);
  if (!sender)
    wire_fail(ProtocolErrorCode::InvalidValue, "knowledge.method: unknown method '" + printable(method) + "'");
  k.contributors = read_contributors(map.at("contributors"), map.path("contributors"), limits);
  k.backbone_fingerprint = read_string(map.at("backbone"), map.path("backbone"));
  k.dim = read_count(map.at("dim"), map.path("dim"), limits.max_dim, "max_dim");
  k.num_classes = read_count(map.at("classes"), map.path("classes"), limits.max_classes, "max_classes");
  const msgpack::object& body = map.at("body");
  map.finish();
  MsgpackBodyValue value(body, "knowledge.body");
  MsgpackBodyReader reader(limits);
  k.payload = codec_of(*sender).read(value, k, reader);
  reader.run();
  check_structure(k, "knowledge", false);  // the conversion refused NaN/Inf already
  return k;
}

}  // namespace wire
}  // namespace fednode
