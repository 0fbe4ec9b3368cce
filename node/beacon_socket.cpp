#include "node/beacon_socket.h"

#include "core/types.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

namespace fednode {
namespace {

std::string dotted(in_addr a) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

// Where a broadcast on each chosen interface goes. An address added without "brd" reports no
// broadcast address, yet the kernel still routes its subnet's last address as one: computed then.
// Point-to-point links and interfaces without broadcast are left out; loopback is kept (nodes on
// one machine).
std::vector<in_addr> broadcast_addresses(const std::vector<std::string>& only) {
  std::vector<in_addr> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask) continue;
    if (!(i->ifa_flags & IFF_UP)) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), i->ifa_name) == only.end()) continue;
    const bool loopback = i->ifa_flags & IFF_LOOPBACK;
    if (!loopback && !(i->ifa_flags & IFF_BROADCAST)) continue;  // point-to-point links: no broadcast
    const in_addr own = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
    in_addr to{};
    if (!loopback && i->ifa_broadaddr)
      to = reinterpret_cast<const sockaddr_in*>(i->ifa_broadaddr)->sin_addr;
    // Without "brd" getifaddrs reports the interface's own address there.
    if (to.s_addr == 0 || to.s_addr == own.s_addr) {
      const in_addr m = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr;
      to.s_addr = own.s_addr | ~m.s_addr;
    }
    if (std::none_of(out.begin(), out.end(), [&](in_addr o) { return o.s_addr == to.s_addr; })) out.push_back(to);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

BeaconSocket::BeaconSocket(const Beacon& own, BeaconSocketOptions options)
    : own_(encode_beacon(own)), options_(std::move(options)) {
  const std::string where = "discovery: UDP port " + std::to_string(options_.port);
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw NetworkError(where + ": cannot open a UDP socket: " + std::strerror(errno));
  const int on = 1;
  // Every node on this machine binds the same port; a broadcast reaches each of them.
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  setsockopt(fd_, SOL_SOCKET, SO_BROADCAST, &on, sizeof on);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_port = htons(options_.port);
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd_, reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0) {
    const int e = errno;
    close(fd_);
    throw NetworkError(where + ": cannot listen for beacons: " + std::strerror(e) +
                       " (another program holds the port without SO_REUSEADDR? set [federation] discovery_port)");
  }
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int e = errno;
    close(fd_);
    throw NetworkError(where + ": " + std::strerror(e));
  }
  send_beacon();  // the first one at once: peers starting together find each other quickly
  thread_ = std::thread([this] { loop(); });
}

BeaconSocket::~BeaconSocket() {
  const char stop = 1;
  (void)!write(wake_[1], &stop, 1);
  if (thread_.joinable()) thread_.join();
  close(fd_);
  close(wake_[0]);
  close(wake_[1]);
}

void BeaconSocket::loop() {
  auto next = std::chrono::steady_clock::now() + options_.interval;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int n = poll(fds, 2, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (n > 0 && fds[1].revents) return;
    if (n > 0 && (fds[0].revents & POLLIN)) receive_all();
    if (std::chrono::steady_clock::now() >= next) {
      send_beacon();
      next += options_.interval;
      // A process stopped for a while (a debugger, a loaded machine) does not send a burst.
      if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now() + options_.interval;
    }
  }
}

void BeaconSocket::send_beacon() {
  // Looked up again each time: an interface that comes up later (DHCP, a cable) is used.
  const std::vector<in_addr> to = broadcast_addresses(options_.interfaces);
  std::vector<std::string> names;
  for (const in_addr a : to) {
    sockaddr_in dest{};
    dest.sin_family = AF_INET;
    dest.sin_port = htons(options_.port);
    dest.sin_addr = a;
    // A send that fails (no route yet, a full buffer) is simply retried with the next beacon.
    (void)sendto(fd_, own_.data(), own_.size(), MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&dest),
                 sizeof dest);
    names.push_back(dotted(a));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  destinations_ = std::move(names);
}

void BeaconSocket::receive_all() {
  // One byte more than a beacon: a longer datagram must not pass as one cut short.
  char buffer[kBeaconBytes + 1];
  for (;;) {
    sockaddr_in from{};
    socklen_t from_size = sizeof from;
    const ssize_t n = recvfrom(fd_, buffer, sizeof buffer, MSG_DONTWAIT | MSG_TRUNC,
                               reinterpret_cast<sockaddr*>(&from), &from_size);
    if (n < 0) return;  // EAGAIN: nothing more now; other errors: try again next time
    HeardBeacon h;
    h.host = dotted(from.sin_addr);
    const size_t size = std::min(static_cast<size_t>(n), sizeof buffer);
    std::string key = h.host + '/' + std::string(buffer, size);
    std::lock_guard<std::mutex> lock(mutex_);
    if (heard_keys_.count(key)) continue;  // a copy of one not yet taken says nothing new
    h.beacon = decode_beacon(std::string_view(buffer, size), &h.malformed);
    if (heard_.size() >= kMaxHeld) {
      heard_keys_.erase(heard_.front().first);
      heard_.pop_front();
      ++dropped_;
    }
    heard_keys_.insert(key);
    heard_.emplace_back(std::move(key), std::move(h));
  }
}

std::vector<HeardBeacon> BeaconSocket::take_heard() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<HeardBeacon> out;
  out.reserve(heard_.size());
  for (auto& [key, heard] : heard_) out.push_back(std::move(heard));
  heard_.clear();
  heard_keys_.clear();
  return out;
}

std::vector<std::string> BeaconSocket::destinations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return destinations_;
}

}  // namespace fednode
