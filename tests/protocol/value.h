// A MessagePack value tree for tests: lets a test write a message the way docs/protocol.md
// describes it, independently of the library's encoder, and then break it field by field.
#pragma once

#include "protocol/msgpack_io.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace fednode::test {

struct Bin {
  std::string bytes;
};
struct Value;
using Array = std::vector<Value>;
using Map = std::vector<std::pair<std::string, Value>>;

struct Value {
  std::variant<std::monostate, bool, uint64_t, int64_t, double, std::string, Bin, Array, Map> v;

  Value() = default;
  Value(bool b) : v(b) {}
  Value(int i) : v(i < 0 ? decltype(v)(int64_t{i}) : decltype(v)(uint64_t(i))) {}
  Value(uint64_t u) : v(u) {}
  Value(int64_t i) : v(i) {}
  Value(double d) : v(d) {}
  Value(const char* s) : v(std::string(s)) {}
  Value(std::string s) : v(std::move(s)) {}
  Value(Bin b) : v(std::move(b)) {}
  Value(Array a) : v(std::move(a)) {}
  Value(Map m) : v(std::move(m)) {}

  Value& operator[](const std::string& key) {
    for (auto& kv : std::get<Map>(v))
      if (kv.first == key) return kv.second;
    throw std::logic_error("test value has no key " + key);
  }
  Value& operator[](size_t i) { return std::get<Array>(v).at(i); }
  void erase(const std::string& key) {
    auto& m = std::get<Map>(v);
    for (auto it = m.begin(); it != m.end(); ++it)
      if (it->first == key) {
        m.erase(it);
        return;
      }
    throw std::logic_error("test value has no key " + key);
  }
  void add(const std::string& key, Value value) { std::get<Map>(v).emplace_back(key, std::move(value)); }
};

inline void pack_value(wire::Packer& pk, const Value& value) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) pk.pack_nil();
        else if constexpr (std::is_same_v<T, bool>) x ? pk.pack_true() : pk.pack_false();
        else if constexpr (std::is_same_v<T, uint64_t>) pk.pack_uint64(x);
        else if constexpr (std::is_same_v<T, int64_t>) pk.pack_int64(x);
        else if constexpr (std::is_same_v<T, double>) pk.pack_double(x);
        else if constexpr (std::is_same_v<T, std::string>) wire::pack_str(pk, x);
        else if constexpr (std::is_same_v<T, Bin>) wire::pack_bin(pk, x.bytes);
        else if constexpr (std::is_same_v<T, Array>) {
          pk.pack_array(static_cast<uint32_t>(x.size()));
          for (const auto& e : x) pack_value(pk, e);
        } else {
          pk.pack_map(static_cast<uint32_t>(x.size()));
          for (const auto& kv : x) {
            wire::pack_str(pk, kv.first);
            pack_value(pk, kv.second);
          }
        }
      },
      value.v);
}

inline std::string pack(const Value& value) {
  std::string out;
  wire::StringSink sink{&out};
  wire::Packer pk(sink);
  pack_value(pk, value);
  return out;
}

// Little-endian bytes of float32 / float64 values.
inline Bin f32_bytes(const std::vector<float>& xs) {
  Bin b;
  for (float x : xs) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    for (int i = 0; i < 4; ++i) b.bytes += static_cast<char>((u >> (8 * i)) & 0xFF);
  }
  return b;
}
inline Bin f64_bytes(const std::vector<double>& xs) {
  Bin b;
  for (double x : xs) {
    uint64_t u;
    std::memcpy(&u, &x, 8);
    for (int i = 0; i < 8; ++i) b.bytes += static_cast<char>((u >> (8 * i)) & 0xFF);
  }
  return b;
}

inline Value tensor(const char* dtype, Array shape, const char* layout, Bin data) {
  return Map{{"dtype", dtype}, {"shape", std::move(shape)}, {"layout", layout}, {"data", std::move(data)}};
}

}  // namespace fednode::test
