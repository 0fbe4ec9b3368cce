// Internal to protocol/: the only header that includes msgpack. Packing helpers, and a bounded
// parse of untrusted bytes into a msgpack object tree with typed, path-naming accessors.
#pragma once

#include "core/protocol_error.h"
#include "core/limits.h"

#include <msgpack.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fednode::wire {

// Maps in the v1 schema have at most 7 entries; anything near this is garbage.
constexpr uint32_t kMaxMapEntries = 32;

// msgpack's packer needs only write(); appending to a std::string avoids sbuffer's extra copy.
struct StringSink {
  std::string* out;
  void write(const char* data, size_t n) { out->append(data, n); }
};
using Packer = msgpack::packer<StringSink>;

void pack_str(Packer& pk, std::string_view s);
void pack_bin(Packer& pk, std::string_view b);

// Parses exactly one MessagePack value filling `bytes` entirely. A first pass with a counting
// visitor enforces Limits (total values, depth, container, string and binary lengths) without
// allocating; only then msgpack::unpack builds the tree, under msgpack::unpack_limit as a second
// guard. Strings and binaries are referenced, not copied: `bytes` must outlive the Document.
class Document {
 public:
  Document(std::string_view bytes, const Limits& limits, const std::string& what);
  const msgpack::object& root() const { return handle_.get(); }

 private:
  msgpack::object_handle handle_;
};

const char* type_name(const msgpack::object& o);

uint64_t as_uint(const msgpack::object& o, const std::string& path);
int64_t as_int(const msgpack::object& o, const std::string& path);  // any integer within int64
double as_float64(const msgpack::object& o, const std::string& path);  // any finite number
bool as_bool(const msgpack::object& o, const std::string& path);
std::string_view as_str(const msgpack::object& o, const std::string& path);
std::string_view as_bin(const msgpack::object& o, const std::string& path);
const msgpack::object_array& as_array(const msgpack::object& o, const std::string& path);

// Peer-supplied text made safe to put in an error message or a log line: at most 64 bytes,
// anything but printable ASCII replaced by '?'.
std::string printable(std::string_view s);


// A map with string keys, read field by field. Keys must be unique; finish() rejects keys no
// one asked for, because a v1 decoder that silently ignored a field would misread a v2 message.
class MapReader {
 public:
  MapReader(const msgpack::object& o, std::string path);
  const msgpack::object& at(const char* key);
  const msgpack::object* find(const char* key);  // nullptr if absent: for optional fields
  std::string path(const char* key) const { return path_ + "." + key; }
  const std::string& path() const { return path_; }
  uint64_t uint(const char* key) { return as_uint(at(key), path(key)); }
  std::string_view str(const char* key) { return as_str(at(key), path(key)); }
  void finish() const;

 private:
  const msgpack::object_map* map_;
  std::string path_;
  std::vector<bool> used_;
};

}  // namespace fednode::wire
