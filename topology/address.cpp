#include "topology/address.h"

#include <cctype>
#include <cstdio>

namespace fednode::topo {
namespace {

bool fail(std::string* why, const std::string& m) {
  if (why) *why = m;
  return false;
}

bool valid_ipv4(const std::string& h) {
  int parts = 0;
  size_t i = 0;
  while (i <= h.size()) {
    size_t j = h.find('.', i);
    if (j == std::string::npos) j = h.size();
    const std::string p = h.substr(i, j - i);
    if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0')) return false;
    if (std::stoi(p) > 255) return false;
    ++parts;
    i = j + 1;
  }
  return parts == 4;
}

bool valid_host(const std::string& h, std::string* why) {
  if (h.empty()) return fail(why, "the host is empty");
  if (h.size() > 253) return fail(why, "the host name is longer than 253 characters");
  bool digits_and_dots = true;
  for (char c : h) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-'))
      return fail(why, std::string("the host contains '") + c + "'");
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.')) digits_and_dots = false;
  }
  if (digits_and_dots && !valid_ipv4(h)) return fail(why, "'" + h + "' is not a valid IPv4 address");
  if (h.front() == '.' || h.front() == '-' || h.back() == '-' || h.find("..") != std::string::npos)
    return fail(why, "'" + h + "' is not a valid host name");
  return true;
}

bool valid_ipv6(const std::string& h, std::string* why) {
  if (h.empty()) return fail(why, "the IPv6 address in brackets is empty");
  for (char c : h)
    if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'))
      return fail(why, std::string("the IPv6 address contains '") + c + "'");
  if (h.find(':') == std::string::npos) return fail(why, "'" + h + "' is not an IPv6 address");
  return true;
}

}  // namespace

std::optional<Endpoint> parse_endpoint(const std::string& address, bool wildcard, std::string* why) {
  const std::string scheme = "tcp://";
  if (address.compare(0, scheme.size(), scheme) != 0) {
    fail(why, "must start with tcp:// (as in tcp://127.0.0.1:7001)");
    return std::nullopt;
  }
  const std::string rest = address.substr(scheme.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) {
    fail(why, "has no port (as in tcp://127.0.0.1:7001)");
    return std::nullopt;
  }
  std::string host = rest.substr(0, colon);
  const std::string port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) < 1 || std::stoi(port) > 65535) {
    fail(why, "has port '" + port + "'; a port is a number from 1 to 65535");
    return std::nullopt;
  }
  Endpoint e;
  e.port = static_cast<uint16_t>(std::stoi(port));
  if (!host.empty() && host.front() == '[') {
    if (host.back() != ']') {
      fail(why, "opens '[' for an IPv6 address without closing it");
      return std::nullopt;
    }
    host = host.substr(1, host.size() - 2);
    if (!valid_ipv6(host, why)) return std::nullopt;
  } else if (host == "*") {
    if (!wildcard) {
      fail(why, "uses host '*', which is only for bind; peers need a concrete host");
      return std::nullopt;
    }
  } else if (host.find(':') != std::string::npos) {
    fail(why, "has an IPv6 host without brackets (write tcp://[::1]:7001)");
    return std::nullopt;
  } else if (!valid_host(host, why)) {
    return std::nullopt;
  }
  for (auto& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  e.host = host;
  return e;
}

bool loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  unsigned a = 0, b = 0, c = 0, d = 0;
  char tail = 0;
  return std::sscanf(host.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 && c < 256 &&
         d < 256;
}

}  // namespace fednode::topo
