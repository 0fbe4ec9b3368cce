// A method's knowledge body as it travels (docs/protocol.md 5.2, "body"), written and read in the
// method's own folder through these interfaces, which protocol/ implements over its bounded
// MessagePack (protocol/wire_body_msgpack.h). The method says what its fields are, in their order,
// with their shapes and bounds; protocol/ says how they become bytes, refuses what breaks a bound
// before anything is allocated for it, and names the field that is wrong. A method that sends a new
// kind of knowledge therefore adds no code to protocol/: its descriptor names its codec
// (MethodDescriptor::codec). Nothing here names MessagePack.
#pragma once

#include "core/limits.h"
#include "core/protocol_error.h"
#include "methods/heads/head.h"
#include "methods/knowledge.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fednode {

enum class WireFloat : uint8_t { F16, F32, F64 };
// Upper stores each trailing n x n symmetric matrix as its upper triangle, row by row.
enum class WireLayout : uint8_t { Dense, Upper };
using WireShape = std::vector<uint64_t>;

// Writes a body, value by value: a map's keys and values alternate after map().
class BodyWriter {
 public:
  virtual ~BodyWriter() = default;
  virtual void map(uint32_t entries) = 0;
  virtual void array(uint32_t items) = 0;
  virtual void text(std::string_view s) = 0;  // a map's keys too
  virtual void uint(uint64_t v) = 0;
  virtual void integer(int64_t v) = 0;  // non-negative values in the unsigned formats
  virtual void real(double v) = 0;
  virtual void bytes(std::string_view b) = 0;
  // prod(shape) values in row-major order (Upper: complete symmetric matrices, of which the upper
  // triangles are written), converted when the message's tensors are converted together. Throws
  // ProtocolError: NonFinite for NaN/Inf and values that overflow `dtype`; InvalidValue, with
  // `positive` (variances), for a value not above 0 or one that float16 rounds to 0.
  virtual void tensor(WireFloat dtype, WireLayout layout, const WireShape& shape, const double* values,
                      const std::string& path, bool positive = false) = 0;
  virtual void tensor(WireFloat dtype, WireLayout layout, const WireShape& shape, const float* values,
                      const std::string& path, bool positive = false) = 0;
  // How this message's knowledge tensors travel: F32, or F16 (FedPFT's half-precision transfer).
  virtual WireFloat floats() const = 0;
};

// A received tensor's header, checked against the bytes present: reading it allocates nothing
// its shape claims.
struct BodyTensor {
  WireFloat dtype = WireFloat::F32;
  WireLayout layout = WireLayout::Dense;
  WireShape shape;
  std::string path;
  std::string_view data;  // the values as they travel, for the reader to convert
};

// One value of a received body, read under the message's limits; every accessor throws
// ProtocolError naming the value's path (WrongType, MissingField, ...).
class BodyValue {
 public:
  virtual ~BodyValue() = default;
  virtual const std::string& path() const = 0;
  // As a map: the value at `key` (MissingField if absent), or null for an optional one.
  virtual std::unique_ptr<BodyValue> at(const char* key) = 0;
  virtual std::unique_ptr<BodyValue> find(const char* key) = 0;
  // Every key of the map was asked for; UnknownField otherwise (a new field is a new version).
  virtual void finish() = 0;
  // As an array: its length; then its items.
  virtual uint32_t items() = 0;
  virtual std::unique_ptr<BodyValue> item(uint32_t i) = 0;
  virtual uint64_t uint() = 0;
  virtual int64_t integer() = 0;  // any integer within int64
  virtual double real() = 0;      // any finite number
  virtual std::string_view bytes() = 0;
  virtual std::string text() = 0;  // at most max_string_bytes, as the parse already bounded it
  virtual BodyTensor tensor() = 0;
  std::string path(const char* key) const { return path() + "." + key; }
};

// What a whole body's reading shares: the limits, and the tensors' values, converted together
// once the body's structure is read (into buffers that must then stay where they are).
class BodyReader {
 public:
  virtual ~BodyReader() = default;
  virtual const Limits& limits() const = 0;
  // DimensionMismatch unless `t` has exactly this shape and layout.
  virtual void expect_shape(const BodyTensor& t, const WireShape& shape, WireLayout layout) const = 0;
  // WrongType unless `t` travels as `dtype`.
  virtual void expect_dtype(const BodyTensor& t, WireFloat dtype) const = 0;
  // prod(t.shape) values into `out` (symmetric matrices mirrored); NonFinite on NaN/Inf; with
  // `positive` (variances), InvalidValue for a value not above 0, checked as it is converted. For
  // knowledge, converted once the whole body is read: `out` must stay where it is until then (a
  // moved Eigen matrix or std::vector keeps its buffer); for heads, at once.
  virtual void unpack(const BodyTensor& t, double* out, bool positive = false) = 0;
  virtual void unpack(const BodyTensor& t, float* out, bool positive = false) = 0;
};

// A kind of knowledge on the wire, named by the descriptor of the method that sends it.
class KnowledgeCodec {
 public:
  virtual ~KnowledgeCodec() = default;
  // Writes `k`'s body, whose structure check() passed (without reading values: the tensors'
  // conversion refuses NaN and Inf, and variances that are not positive).
  virtual void write(const Knowledge& k, BodyWriter& w) const = 0;
  // Reads a body for `k`, whose contributors, dim and classes are read and bounded already.
  virtual KnowledgePayload read(BodyValue& body, const Knowledge& k, BodyReader& r) const = 0;
  // The payload's structure (ProtocolError naming what is wrong, under `where`): shapes against
  // k's dim and classes, orders, counts; with `check_values`, also every value's own rule (finite;
  // variances positive), which the tensors' conversion applies otherwise, in the same pass.
  virtual void check(const Knowledge& k, const std::string& where, bool check_values) const = 0;
  // What the payload asks of the limits, beside the header's: its entries' sizes, and the samples
  // it claims (added with add_samples).
  virtual void bound(const Knowledge& k, const Limits& limits, const std::string& where, uint64_t& samples) const = 0;
  // The body's entries (classes, models, a few captions each), each about 256 bytes of keys and
  // tensor headers beside the values: the encoder reserves for them and never reallocates.
  virtual size_t entries(const Knowledge& k) const = 0;
};

// Heads of some kinds in a head message (docs/protocol.md 5.3): the entries that stand for the
// head's parameters (a linear or adapter head's layers; a model's spec and parameters). The kinds
// every method may train are methods/heads'; a method that trains its own names its codec in its
// descriptor (MethodDescriptor::head_codec).
class HeadCodec {
 public:
  virtual ~HeadCodec() = default;
  // The Head::kind() values it writes and reads.
  virtual std::vector<std::string> kinds() const = 0;
  // How many entries write() adds to the head message's map.
  virtual uint32_t entries(const Head& head) const = 0;
  virtual void write(const Head& head, BodyWriter& w) const = 0;
  // A head of `kind` from the head message `map`, for its dim and classes (read and bounded
  // already). `rest` reads the message's remaining entries and finishes the map: the codec calls it
  // once, at the point from which its own checks may refuse what is read.
  virtual std::shared_ptr<const Head> read(const std::string& kind, BodyValue& map, uint64_t dim, uint64_t classes,
                                           BodyReader& r, const std::function<void()>& rest) const = 0;
  // A head of `kind` from a head file's body (Head::save wrote it; methods/heads/head.h), read
  // like network input; InputError naming `where` for what is wrong.
  virtual std::unique_ptr<Head> load(const std::string& kind, std::istream& in, const std::string& where) const = 0;
};

// --- shared by the kinds' codecs --------------------------------------------------------------

[[noreturn]] void wire_fail(ProtocolErrorCode code, const std::string& message);
// Peer-supplied text made safe to put in an error message or a log line: at most 64 bytes,
// anything but printable ASCII replaced by '?'.
std::string printable_text(std::string_view s);
// A contributor set: non-empty, strictly increasing 32-bit ids, at most limits.max_contributors.
void write_contributors(BodyWriter& w, const Contributors& c);
Contributors read_contributors(BodyValue& v, const Limits& limits);
std::string shape_text(const WireShape& shape);  // "[3, 4]"
// DimensionMismatch unless `m` is rows x cols.
void expect_dims(Eigen::Index rows_is, Eigen::Index cols_is, Eigen::Index rows, Eigen::Index cols,
                 const std::string& where);
template <typename M>
void expect_dims(const M& m, Eigen::Index rows, Eigen::Index cols, const std::string& where) {
  expect_dims(m.rows(), m.cols(), rows, cols, where);
}
template <typename M>
void expect_finite(const M& m, const std::string& where) {
  if (!all_finite(m)) wire_fail(ProtocolErrorCode::NonFinite, where + ": holds NaN or Inf");
}
// Adds one count to the samples a piece claims to summarise, which bound what merging it may
// allocate (FedPFT samples every count; counts also add up across pieces).
void add_samples(uint64_t& total, uint64_t count, const std::string& path, const Limits& limits);
// add_samples for each entry's `count` (a class's, a model's).
template <typename Entries>
void add_entry_samples(uint64_t& total, const Entries& entries, const std::string& path, const Limits& limits) {
  for (const auto& e : entries) add_samples(total, static_cast<uint64_t>(std::max<int64_t>(e.count, 0)), path, limits);
}
// Classes listed per label must be sorted, distinct, within range and backed by data.
void check_class_entry(int label, int64_t count, int previous, int num_classes, const std::string& where);
// A per-class entry's label and count as received; the label must exceed `previous`.
std::pair<int, int64_t> read_class_header(BodyValue& entry, int previous, int num_classes, uint64_t& samples,
                                          const Limits& limits);
// A body's list `key` of per-class entries: at most one per class.
std::unique_ptr<BodyValue> read_class_list(BodyValue& body, const char* key, int num_classes);

// Knowledge of one entry per contributor (FedMITR's models, FGL's shards), no more, no fewer: the
// entries' owners, in order, are the contributors. `list` is the entries' path, `noun` one entry.
template <typename Entry>
void check_one_per_contributor(const std::vector<Entry>& entries, const Knowledge& k, const std::string& list,
                               const std::string& noun) {
  if (entries.size() != k.contributors.size())
    wire_fail(ProtocolErrorCode::InvalidValue, list + ": " + std::to_string(entries.size()) + " " + noun + "s for " +
                                                   std::to_string(k.contributors.size()) + " contributors");
  auto owner = k.contributors.begin();
  for (size_t i = 0; i < entries.size(); ++i, ++owner)
    if (entries[i].owner != *owner)
      wire_fail(ProtocolErrorCode::InvalidValue, list + "[" + std::to_string(i) + "].owner: " +
                                                     std::to_string(entries[i].owner) + ", expected contributor " +
                                                     std::to_string(*owner) + " (one " + noun +
                                                     " per contributor, in order)");
}
// The list `key` of a body with one entry per contributor, its length checked before any entry
// is read.
std::unique_ptr<BodyValue> read_one_per_contributor(BodyValue& body, const char* key, const std::string& noun,
                                                    const Knowledge& k);
// An entry's "owner": a node id, which is 32 bits on the wire.
NodeId read_owner(BodyValue& entry);

}  // namespace fednode
