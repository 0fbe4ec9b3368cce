// Node addresses in topology files: tcp://HOST:PORT, HOST an IPv4 address, a host name, or an
// IPv6 address in brackets. Internal to topology/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fednode::topo {

struct Endpoint {
  std::string host;  // lower-cased; IPv6 without the brackets
  uint16_t port = 0;
  std::string key() const { return host + "|" + std::to_string(port); }
};

// `wildcard`: whether HOST may be "*" (a listening address). On failure returns nothing and
// says why in `why`.
std::optional<Endpoint> parse_endpoint(const std::string& address, bool wildcard, std::string* why);

// 127.0.0.0/8, ::1 or localhost (a parsed, lower-cased host): only this machine can connect.
bool loopback_host(const std::string& host);

}  // namespace fednode::topo
