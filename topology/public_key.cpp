#include "topology/public_key.h"

#include <cctype>

namespace fednode {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool fail(std::string* why, const std::string& message) {
  if (why) *why = message;
  return false;
}

bool decode_hex(const std::string& t, PublicKeyBytes& out, std::string* why) {
  for (size_t i = 0; i < kPublicKeyBytes; ++i) {
    const int hi = hex_value(t[2 * i]), lo = hex_value(t[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return fail(why, "character " + std::to_string(2 * i + (hi < 0 ? 1 : 2)) + " is not a hex digit");
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

bool decode_base64(std::string t, PublicKeyBytes& out, std::string* why) {
  while (!t.empty() && t.back() == '=') t.pop_back();
  // 32 bytes are 43 base64 digits; the last one's two low bits are padding and must be zero.
  if (t.size() != 43)
    return fail(why, "expected 64 hex digits or 44 base64 characters (32 bytes), got " +
                         std::to_string(t.size()) + " characters");
  uint32_t acc = 0;
  int bits = 0;
  size_t n = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const int v = base64_value(t[i]);
    if (v < 0) return fail(why, "character " + std::to_string(i + 1) + " is neither hex nor base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = static_cast<uint8_t>((acc >> bits) & 0xFF);
    }
  }
  if ((acc & ((1u << bits) - 1)) != 0) return fail(why, "base64 text has stray bits after the 32nd byte");
  return true;
}

}  // namespace

std::optional<PublicKeyBytes> decode_public_key(const std::string& text, std::string* why) {
  const std::string t = trim(text);
  PublicKeyBytes key{};
  if (t.empty()) {
    fail(why, "the key is empty");
    return std::nullopt;
  }
  if (t.size() == 2 * kPublicKeyBytes) {
    if (decode_hex(t, key, why)) return key;
    return std::nullopt;
  }
  // A 43-digit base64 text may happen to use only hex digits, so the length decides first.
  std::string stripped = t;
  while (!stripped.empty() && stripped.back() == '=') stripped.pop_back();
  bool all_hex = true;
  for (char c : t) all_hex = all_hex && hex_value(c) >= 0;
  if (all_hex && stripped.size() != 43) {
    fail(why, "expected 64 hex digits (32 bytes), got " + std::to_string(t.size()));
    return std::nullopt;
  }
  if (decode_base64(t, key, why)) return key;
  return std::nullopt;
}

std::string public_key_hex(const PublicKeyBytes& key) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(2 * kPublicKeyBytes);
  for (uint8_t b : key) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

}  // namespace fednode
