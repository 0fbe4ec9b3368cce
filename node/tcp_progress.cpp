#include "node/tcp_progress.h"

#include <cstddef>

#include <linux/tcp.h>  // tcp_info with tcpi_bytes_acked (glibc's netinet/tcp.h lacks it)
#include <netinet/in.h>
#include <sys/socket.h>

namespace fednode {
namespace {

// One end of the connection on `fd` as raw bytes, empty if the kernel does not say.
std::string address_of(int fd, bool remote) {
  sockaddr_storage a{};
  socklen_t n = sizeof a;
  const int rc = remote ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &n)
                        : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  if (rc != 0 || n > sizeof a) return {};
  return std::string(reinterpret_cast<const char*>(&a), n);
}

// The kernel's TCP_INFO for the connection between `local` and `remote`, if `fd` still is that
// connection and the kernel fills the structure up to both byte counters (4.1 and later).
std::optional<tcp_info> connection_info(int fd, const std::string& local, const std::string& remote) {
  if (fd < 0 || address_of(fd, false) != local || address_of(fd, true) != remote) return std::nullopt;
  tcp_info info{};
  socklen_t n = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &n) != 0) return std::nullopt;
  // Kernels before 4.1 fill less of the structure; then nothing is known of progress.
  if (n < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) return std::nullopt;
  return info;
}

}  // namespace

TcpProgress::TcpProgress(int fd) {
  local_ = address_of(fd, false);
  remote_ = address_of(fd, true);
  if (!local_.empty() && !remote_.empty()) fd_ = fd;
}

std::optional<uint64_t> TcpProgress::bytes_acked() const {
  const auto info = connection_info(fd_, local_, remote_);
  if (!info) return std::nullopt;
  return info->tcpi_bytes_acked;
}

std::optional<uint64_t> TcpProgress::bytes_received() const {
  const auto info = connection_info(fd_, local_, remote_);
  if (!info) return std::nullopt;
  return info->tcpi_bytes_received;
}

}  // namespace fednode
