// Text that came from a peer or a file, made safe for a log line or an error message: printable
// ASCII only (anything else becomes '?'), at most `max` characters (docs/security.md).
#pragma once

#include <string>

namespace fednode {

inline std::string printable(const std::string& s, size_t max = 200) {
  std::string out;
  for (char c : s.substr(0, max)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return s.size() > max ? out + "..." : out;
}

}  // namespace fednode
