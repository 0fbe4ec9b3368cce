// Small builders for topology texts and a check that an error message says what it should.
#pragma once

#include "core/rng.h"
#include "topology/topology.h"

#include "../common/expect_error.h"
#include "../common/temp_dir.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace fednode::test {

// A distinct, well-formed public key per index (tests only check formats, never crypto).
inline std::string key_hex(uint64_t i) {
  PublicKeyBytes k{};
  Rng rng(i + 1000);
  for (auto& b : k) b = static_cast<uint8_t>(rng.next() & 0xFF);
  return public_key_hex(k);
}

inline std::string federation(const std::string& mode, const std::string& extra = "") {
  return "[federation]\nmode = \"" + mode + "\"\nmethod = \"fedcgs\"\n" + extra + "\n";
}

inline std::string node(NodeId id, const std::string& extra = "") {
  return "[[node]]\nid = " + std::to_string(id) + "\naddress = \"tcp://127.0.0.1:" + std::to_string(7000 + id) +
         "\"\npublic_key = \"" + key_hex(id) + "\"\n" + extra + "\n";
}

inline std::string nodes(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += node(static_cast<NodeId>(i));
  return s;
}

inline std::string edges(const std::vector<std::pair<int, int>>& e) {
  std::string s;
  for (const auto& [a, b] : e) s += "[[edge]]\nfrom = " + std::to_string(a) + "\nto = " + std::to_string(b) + "\n\n";
  return s;
}

inline Topology parse(const std::string& text) { return parse_topology(text, "t.toml"); }

// The message of the InputError that parsing `text` throws ("" if none is thrown).
inline std::string error_of(const std::string& text, const LoadOptions& options = {}) {
  try {
    parse_topology(text, "t.toml", ".", options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR(text, fragment)                                           \
  do {                                                                         \
    const std::string message_ = ::fednode::test::error_of(text);              \
    EXPECT_NE(message_, "") << "expected an error containing: " << (fragment); \
    EXPECT_NE(message_.find(fragment), std::string::npos) << message_;         \
  } while (0)

}  // namespace fednode::test
