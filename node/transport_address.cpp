// Whether the host of a transport address resolves (Transport::resolution_problem): said when a
// node cannot listen, and warned about for a peer's address, which ZeroMQ otherwise retries in
// silence.
#include "node/transport.h"

#include <netdb.h>
#include <sys/socket.h>

namespace fednode {

std::string Transport::resolution_problem(const std::string& address) {
  const std::string scheme = "tcp://";
  if (address.rfind(scheme, 0) != 0) return "";
  std::string host = address.substr(scheme.size());
  const auto colon = host.rfind(':');
  if (colon == std::string::npos) return "";
  host = host.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return "";  // IPv6 literal
  if (host == "*") return "";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found) freeaddrinfo(found);
  return rc == 0 ? "" : "host '" + host + "' does not resolve: " + gai_strerror(rc);
}

}  // namespace fednode
