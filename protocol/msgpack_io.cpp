#include "protocol/msgpack_io.h"

#include "methods/wire_body.h"

#include <algorithm>
#include <new>

namespace fednode::wire {
namespace {

uint64_t array_limit(const Limits& limits) {
  // The longest arrays of the schema: contributor sets, per-class lists and counts.
  return std::max<uint64_t>({limits.max_contributors, limits.max_classes, 16});
}

// First pass: walks the bytes, allocating nothing, and throws at the first limit exceeded.
struct LimitVisitor : msgpack::null_visitor {
  LimitVisitor(const Limits& l, const std::string& w) : limits(l), what(w), max_array(array_limit(l)) {}

  void item() {
    if (++items > limits.max_items)
      throw ProtocolError(ProtocolErrorCode::TooLarge, what + ": more than " +
                                                           std::to_string(limits.max_items) +
                                                           " MessagePack values (max_items)");
  }
  void enter() {
    if (++depth > limits.max_depth)
      throw ProtocolError(ProtocolErrorCode::TooLarge, what + ": nesting deeper than " +
                                                           std::to_string(limits.max_depth) +
                                                           " (max_depth)");
  }
  bool visit_nil() { item(); return true; }
  bool visit_boolean(bool) { item(); return true; }
  bool visit_positive_integer(uint64_t) { item(); return true; }
  bool visit_negative_integer(int64_t) { item(); return true; }
  bool visit_float32(float) { item(); return true; }
  bool visit_float64(double) { item(); return true; }
  bool visit_str(const char*, uint32_t size) {
    item();
    check_limit(size, limits.max_string_bytes, what + ": a string", "max_string_bytes");
    return true;
  }
  bool visit_bin(const char*, uint32_t size) {
    item();
    check_limit(size, limits.max_message_bytes, what + ": a binary", "max_message_bytes");
    return true;
  }
  bool visit_ext(const char*, uint32_t) {
    throw ProtocolError(ProtocolErrorCode::WrongType,
                        what + ": MessagePack extension types are not part of the protocol");
  }
  bool start_array(uint32_t n) {
    item();
    enter();
    check_limit(n, max_array, what + ": an array", "max_contributors/max_classes");
    return true;
  }
  bool end_array() { --depth; return true; }
  bool start_map(uint32_t n) {
    item();
    enter();
    check_limit(n, kMaxMapEntries, what + ": a map", "32 entries");
    return true;
  }
  bool end_map() { --depth; return true; }
  void parse_error(size_t, size_t error_offset) {
    bad = true;
    offset = error_offset;
  }
  void insufficient_bytes(size_t, size_t) { truncated = true; }

  const Limits& limits;
  const std::string& what;
  uint64_t max_array;
  uint64_t items = 0;
  uint32_t depth = 0;
  bool bad = false, truncated = false;
  size_t offset = 0;
};

bool reference_buffer(msgpack::type::object_type type, std::size_t, void*) {
  return type == msgpack::type::STR || type == msgpack::type::BIN;
}

}  // namespace

void pack_str(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void pack_bin(Packer& pk, std::string_view b) {
  pk.pack_bin(static_cast<uint32_t>(b.size()));
  pk.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
}

Document::Document(std::string_view bytes, const Limits& limits, const std::string& what) {
  check_limit(bytes.size(), limits.max_message_bytes, what, "max_message_bytes");
  if (bytes.empty()) throw ProtocolError(ProtocolErrorCode::Truncated, what + ": empty input");
  LimitVisitor visitor(limits, what);
  size_t off = 0;
  const bool ok = msgpack::parse(bytes.data(), bytes.size(), off, visitor);
  if (!ok) {
    if (visitor.bad)
      throw ProtocolError(ProtocolErrorCode::Malformed,
                          what + ": not valid MessagePack (byte " + std::to_string(visitor.offset) + ")");
    throw ProtocolError(ProtocolErrorCode::Truncated,
                        what + ": truncated (" + std::to_string(bytes.size()) + " bytes end inside a value)");
  }
  if (off != bytes.size())
    throw ProtocolError(ProtocolErrorCode::TrailingBytes,
                        what + ": " + std::to_string(bytes.size() - off) + " bytes after the message");
  try {
    const msgpack::unpack_limit unpack_limits(array_limit(limits), kMaxMapEntries, limits.max_string_bytes,
                                              limits.max_message_bytes, 0, limits.max_depth);
    size_t off2 = 0;
    handle_ = msgpack::unpack(bytes.data(), bytes.size(), off2, reference_buffer, nullptr, unpack_limits);
  } catch (const std::bad_alloc&) {
    throw ProtocolError(ProtocolErrorCode::TooLarge, what + ": out of memory while parsing");
  } catch (const std::exception& e) {
    // The first pass accepted these bytes, so this is the second guard firing.
    throw ProtocolError(ProtocolErrorCode::TooLarge, what + ": " + e.what());
  }
}

const char* type_name(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "boolean";
    case msgpack::type::POSITIVE_INTEGER: return "unsigned integer";
    case msgpack::type::NEGATIVE_INTEGER: return "negative integer";
    case msgpack::type::FLOAT32: return "float32";
    case msgpack::type::FLOAT64: return "float64";
    case msgpack::type::STR: return "string";
    case msgpack::type::BIN: return "binary";
    case msgpack::type::ARRAY: return "array";
    case msgpack::type::MAP: return "map";
    case msgpack::type::EXT: return "extension";
  }
  return "unknown type";
}

namespace {
[[noreturn]] void wrong_type(const msgpack::object& o, const std::string& path, const char* expected) {
  throw ProtocolError(ProtocolErrorCode::WrongType,
                      path + ": expected " + expected + ", found " + type_name(o));
}
}  // namespace

uint64_t as_uint(const msgpack::object& o, const std::string& path) {
  if (o.type == msgpack::type::NEGATIVE_INTEGER)
    throw ProtocolError(ProtocolErrorCode::InvalidValue,
                        path + ": must not be negative (found " + std::to_string(o.via.i64) + ")");
  if (o.type != msgpack::type::POSITIVE_INTEGER) wrong_type(o, path, "an unsigned integer");
  return o.via.u64;
}

int64_t as_int(const msgpack::object& o, const std::string& path) {
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return o.via.i64;
  if (o.type != msgpack::type::POSITIVE_INTEGER) wrong_type(o, path, "an integer");
  if (o.via.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw ProtocolError(ProtocolErrorCode::InvalidValue, path + ": " + std::to_string(o.via.u64) + " is beyond int64");
  return static_cast<int64_t>(o.via.u64);
}

double as_float64(const msgpack::object& o, const std::string& path) {
  // msgpack-c hands a float whose value is integral over as an integer; both are numbers.
  if (o.type == msgpack::type::POSITIVE_INTEGER) return static_cast<double>(o.via.u64);
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return static_cast<double>(o.via.i64);
  if (o.type != msgpack::type::FLOAT64 && o.type != msgpack::type::FLOAT32) wrong_type(o, path, "a number");
  if (!std::isfinite(o.via.f64)) throw ProtocolError(ProtocolErrorCode::NonFinite, path + ": NaN or Inf");
  return o.via.f64;
}

bool as_bool(const msgpack::object& o, const std::string& path) {
  if (o.type != msgpack::type::BOOLEAN) wrong_type(o, path, "a boolean");
  return o.via.boolean;
}

std::string_view as_str(const msgpack::object& o, const std::string& path) {
  if (o.type != msgpack::type::STR) wrong_type(o, path, "a string");
  return {o.via.str.ptr, o.via.str.size};
}

std::string_view as_bin(const msgpack::object& o, const std::string& path) {
  if (o.type != msgpack::type::BIN) wrong_type(o, path, "a binary");
  return {o.via.bin.ptr, o.via.bin.size};
}

const msgpack::object_array& as_array(const msgpack::object& o, const std::string& path) {
  if (o.type != msgpack::type::ARRAY) wrong_type(o, path, "an array");
  return o.via.array;
}

std::string printable(std::string_view s) { return printable_text(s); }

MapReader::MapReader(const msgpack::object& o, std::string path) : path_(std::move(path)) {
  if (o.type != msgpack::type::MAP) wrong_type(o, path_, "a map");
  map_ = &o.via.map;
  used_.assign(map_->size, false);
  for (uint32_t i = 0; i < map_->size; ++i) {
    const msgpack::object& key = map_->ptr[i].key;
    if (key.type != msgpack::type::STR)
      throw ProtocolError(ProtocolErrorCode::WrongType,
                          path_ + ": map keys must be strings, found " + type_name(key));
    for (uint32_t j = 0; j < i; ++j)
      if (map_->ptr[j].key.via.str.size == key.via.str.size &&
          std::string_view(map_->ptr[j].key.via.str.ptr, key.via.str.size) ==
              std::string_view(key.via.str.ptr, key.via.str.size))
        throw ProtocolError(ProtocolErrorCode::Malformed,
                            path_ + ": key '" + printable({key.via.str.ptr, key.via.str.size}) +
                                "' appears twice");
  }
}

const msgpack::object* MapReader::find(const char* key) {
  const std::string_view k(key);
  for (uint32_t i = 0; i < map_->size; ++i) {
    const auto& entry = map_->ptr[i];
    if (std::string_view(entry.key.via.str.ptr, entry.key.via.str.size) == k) {
      used_[i] = true;
      return &entry.val;
    }
  }
  return nullptr;
}

const msgpack::object& MapReader::at(const char* key) {
  if (const msgpack::object* value = find(key)) return *value;
  throw ProtocolError(ProtocolErrorCode::MissingField, path_ + ": missing field '" + key + "'");
}

void MapReader::finish() const {
  for (uint32_t i = 0; i < map_->size; ++i)
    if (!used_[i]) {
      const auto& key = map_->ptr[i].key.via.str;
      throw ProtocolError(ProtocolErrorCode::UnknownField,
                          path_ + ": unknown field '" + printable({key.ptr, key.size}) + "'");
    }
}

}  // namespace fednode::wire
