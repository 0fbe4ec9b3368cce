// How far one TCP connection that libzmq opened has got: the bytes its peer's TCP acknowledged,
// and the bytes that arrived from the peer. A transfer that still moves on a slow or lossy link
// is not silence: a node waiting for an acknowledgement, or for a sender's knowledge, counts its
// deadline from the last movement (docs/node.md, "Reliability").
//
// libzmq keeps its sockets to itself; its monitor names a connection's descriptor when the
// connection is made. The addresses recorded then tell that descriptor apart from a later socket
// that reuses its number after libzmq closed it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fednode {

class TcpProgress {
 public:
  // An invalid probe (bytes_acked() is always nullopt) for what is not a connected TCP socket.
  explicit TcpProgress(int fd);
  // Bytes of data the peer acknowledged on this connection so far; nullopt when the descriptor
  // no longer is this connection (closed, or reused by another socket) or the kernel does not say.
  std::optional<uint64_t> bytes_acked() const;
  // Bytes of data received from the peer on this connection so far; nullopt as above.
  std::optional<uint64_t> bytes_received() const;

 private:
  int fd_ = -1;
  std::string local_, remote_;  // the connection's addresses, as bytes of sockaddr_storage
};

}  // namespace fednode
