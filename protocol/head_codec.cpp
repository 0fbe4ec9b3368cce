// Head payloads (docs/protocol.md 5.3): the header every head shares (kind, contributors, backbone,
// dim, classes), the entries that stand for its parameters, which its kind's codec writes and reads
// (methods/wire_body.h: methods/heads' layers, or a method's own model), and personalised runs'
// class means. No kind has code here.
#include "methods/registry.h"
#include "protocol/payload_parts.h"
#include "protocol/tensor.h"
#include "protocol/wire_body_msgpack.h"

namespace fednode {

using namespace wire;

namespace {

using Shape = std::vector<uint64_t>;

void pack_class_means(Packer& pk, std::string& out, const ClassMeans& means) {
  pack_str(pk, "class_means");
  pk.pack_map(2);
  pack_str(pk, "means");
  pack_tensor(pk, out, DType::F64, Layout::Dense,
              Shape{static_cast<uint64_t>(means.means.rows()), static_cast<uint64_t>(means.means.cols())},
              means.means.data(), "head.class_means.means");
  pack_str(pk, "present");
  pk.pack_array(static_cast<uint32_t>(means.present.size()));
  for (bool p : means.present) p ? pk.pack_true() : pk.pack_false();
}

// Absent classes' rows must be zero: a mean for a class no one holds would be made up.
std::shared_ptr<const ClassMeans> read_class_means(const msgpack::object& o, uint64_t classes, uint64_t dim) {
  MapReader m(o, "head.class_means");
  const TensorIn means = read_tensor(m.at("means"), m.path("means"));
  const auto& present = as_array(m.at("present"), m.path("present"));
  m.finish();
  expect_shape(means, {classes, dim}, Layout::Dense);
  if (present.size != classes)
    wire_fail(ProtocolErrorCode::DimensionMismatch, m.path("present") + ": " + std::to_string(present.size) +
                                                        " entries for " + std::to_string(classes) + " classes");
  auto r = std::make_shared<ClassMeans>();
  r->means.resize(static_cast<Eigen::Index>(classes), static_cast<Eigen::Index>(dim));
  unpack_tensor(means, r->means.data());
  for (uint32_t c = 0; c < present.size; ++c) {
    r->present.push_back(as_bool(present.ptr[c], m.path("present") + "[" + std::to_string(c) + "]"));
    if (!r->present.back() && !r->means.row(c).isZero())
      wire_fail(ProtocolErrorCode::InvalidValue, m.path("means") + ": class " + std::to_string(c) +
                                                     " is absent but has a non-zero mean");
  }
  return r;
}

}  // namespace

namespace wire {

void pack_head(Packer& pk, std::string& out, const HeadMessage& h) {
  if (!h.head) wire_fail(ProtocolErrorCode::InvalidValue, "head: no head to send");
  if (h.contributors.empty()) wire_fail(ProtocolErrorCode::InvalidValue, "head: names no contributors");
  const Head& head = *h.head;
  const HeadCodec* codec = head_codec_for(head.kind());
  if (!codec)
    wire_fail(ProtocolErrorCode::InvalidValue,
              "head: kind '" + head.kind() + "' cannot be sent (" + head_kind_names() + ")");
  const ClassMeans* means = h.class_means.get();
  if (means && (means->means.rows() != head.num_classes() || means->means.cols() != head.dim() ||
                means->present.size() != static_cast<size_t>(head.num_classes())))
    wire_fail(ProtocolErrorCode::DimensionMismatch, "head.class_means: not C x d for the head's C and d");
  pk.pack_map(5 + codec->entries(head) + (means ? 1 : 0));
  pack_str(pk, "kind");
  pack_str(pk, head.kind());
  pack_origin(pk, h.contributors, h.backbone_fingerprint, head.dim(), head.num_classes());
  TensorJobs jobs;
  MsgpackBodyWriter w(pk, out, DType::F32, jobs);
  codec->write(head, w);
  jobs.run();  // the values into the places the structure left for them
  if (means) pack_class_means(pk, out, *means);
}

HeadMessage read_head(const msgpack::object& o, const Limits& limits) {
  MapReader map(o, "head");
  HeadMessage h;
  const std::string kind = read_string(map.at("kind"), map.path("kind"));
  const HeadCodec* codec = head_codec_for(kind);
  if (!codec)
    wire_fail(ProtocolErrorCode::InvalidValue,
              "head.kind: unknown head kind '" + printable(kind) + "' (" + head_kind_names() + ")");
  h.contributors = read_contributors(map.at("contributors"), map.path("contributors"), limits);
  h.backbone_fingerprint = read_string(map.at("backbone"), map.path("backbone"));
  const uint64_t dim = static_cast<uint64_t>(read_count(map.at("dim"), map.path("dim"), limits.max_dim, "max_dim"));
  const uint64_t classes =
      static_cast<uint64_t>(read_count(map.at("classes"), map.path("classes"), limits.max_classes, "max_classes"));
  MsgpackBodyValue value(o, "head", map);
  MsgpackBodyReader reader(limits, /*deferred=*/false);
  h.head = codec->read(kind, value, dim, classes, reader, [&] {
    if (const msgpack::object* means = map.find("class_means")) h.class_means = read_class_means(*means, classes, dim);
    map.finish();
  });
  return h;
}

}  // namespace wire
}  // namespace fednode
