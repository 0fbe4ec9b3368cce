// A TCP relay between a node and the port its peer binds, for tests that need a fault at an exact
// moment of a conversation. It forwards both ways, except on the first connection that carries
// more than `hold_after_bytes` towards the target: from then on what the target answers on that
// connection is swallowed. With the threshold between a hello and a knowledge frame, that is the
// acknowledgement of the knowledge: the receiver has stored the message, the sender never hears
// so, and killing the sender then is a kill inside the acknowledgement window, every time.
// Connections after that one pass untouched (the restarted sender's resend gets through).
// With `bytes_per_second`, it also forwards towards the target no faster than that, through a
// small receive window, so that the sender's TCP sees its bytes acknowledged at that pace: a
// slow link, for tests of deadlines that follow progress.
// With drop_towards_target(), it reads the ZeroMQ messages (ZMTP 3, the NULL mechanism: hop
// encryption off) that the connections up to the held one carry towards the target, and drops
// those the predicate picks, whole: a sender's receipts, so that none ever reaches its receiver.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string_view>
#include <string>
#include <thread>
#include <vector>

namespace fednode::testing_network {

class TcpRelay {
 public:
  TcpRelay(int listen_port, int target_port, int64_t hold_after_bytes, int64_t bytes_per_second = 0)
      : target_port_(target_port), hold_after_(hold_after_bytes), rate_(bytes_per_second) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int yes = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (rate_ > 0) {  // before listen: accepted sockets inherit it, and it sets the window they offer
      const int window = 16 * 1024;
      ::setsockopt(listener_, SOL_SOCKET, SO_RCVBUF, &window, sizeof window);
    }
    sockaddr_in a = loopback(listen_port);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 8) != 0)
      throw std::runtime_error("relay: cannot listen on port " + std::to_string(listen_port));
    if (::pipe(wake_) != 0) throw std::runtime_error("relay: pipe failed");
    thread_ = std::thread([this] { loop(); });
  }
  ~TcpRelay() {
    stop_ = true;
    (void)!::write(wake_[1], "x", 1);
    thread_.join();
    for (const Pair& p : pairs_) {
      ::close(p.client);
      ::close(p.server);
    }
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  // Bytes the target sent on the held connection since the hold began (swallowed).
  int64_t held_bytes() const { return held_bytes_.load(); }
  bool holding() const { return holding_.load(); }

  // Picks the messages (one ZeroMQ message each, a fednode frame or chunk) to drop towards the
  // target on the connections accepted until the hold began, that one included. Set before any
  // connection comes.
  using Pick = std::function<bool(std::string_view message)>;
  void drop_towards_target(Pick drop) { drop_ = std::move(drop); }
  int64_t dropped() const { return dropped_.load(); }
  // Connections accepted from now on are not filtered, hold or no hold.
  void stop_dropping() { dropping_ = false; }

 private:
  struct Pair {
    int client = -1, server = -1;
    int64_t forwarded = 0;
    bool held = false;
    bool filtered = false;      // drop_ applies to what it carries towards the target
    int64_t greeting_left = 64; // ZMTP 3's greeting goes through as it comes (it is sent in parts)
    std::string pending;        // the start of a ZMTP frame not yet whole
  };

  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }

  static bool write_all(int fd, const char* data, ssize_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, data, static_cast<size_t>(n), MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      data += w;
      n -= w;
    }
    return true;
  }

  void accept_one() {
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(target_port_);
    if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(server);
      ::close(client);  // the target is not up yet: the node's DEALER dials again
      return;
    }
    Pair p;
    p.client = client;
    p.server = server;
    p.filtered = drop_ && !hold_used_ && dropping_;
    pairs_.push_back(std::move(p));
  }

  // Forwards what `p.pending` holds of whole ZMTP frames towards the target, but for the
  // messages drop_ picks; a frame not yet whole waits for more bytes. Frames: a flags byte
  // (0x02 long, 0x04 command), a size of 1 or 8 bytes (network order), the body.
  bool forward_filtered(Pair& p) {
    size_t at = 0;
    const std::string& b = p.pending;
    if (p.greeting_left > 0) {
      at = static_cast<size_t>(std::min<int64_t>(p.greeting_left, static_cast<int64_t>(b.size())));
      p.greeting_left -= static_cast<int64_t>(at);
      if (!write_all(p.server, b.data(), static_cast<ssize_t>(at))) return false;
    }
    for (;;) {
      if (b.size() - at < 2) break;
      const auto flags = static_cast<unsigned char>(b[at]);
      const size_t size_bytes = flags & 0x02 ? 8 : 1;
      if (b.size() - at < 1 + size_bytes) break;
      uint64_t size = 0;
      for (size_t i = 0; i < size_bytes; ++i) size = size << 8 | static_cast<unsigned char>(b[at + 1 + i]);
      const size_t whole = 1 + size_bytes + static_cast<size_t>(size);
      if (b.size() - at < whole) break;
      const std::string_view body(b.data() + at + 1 + size_bytes, static_cast<size_t>(size));
      if (!(flags & 0x04) && drop_(body)) ++dropped_;
      else if (!write_all(p.server, b.data() + at, static_cast<ssize_t>(whole))) return false;
      at += whole;
    }
    p.pending.erase(0, at);
    return true;
  }

  // One read on `from`; false when the connection pair is done.
  bool pass(Pair& p, bool towards_target) {
    char buf[1 << 16];
    const int from = towards_target ? p.client : p.server, to = towards_target ? p.server : p.client;
    const size_t want = towards_target && rate_ > 0 ? static_cast<size_t>(std::clamp<int64_t>(rate_ / 20, 1, sizeof buf))
                                                    : sizeof buf;
    const ssize_t n = ::recv(from, buf, want, 0);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) return false;
    if (towards_target && rate_ > 0) ::usleep(static_cast<useconds_t>(n * 1'000'000 / rate_));
    if (towards_target) {
      p.forwarded += n;
      if (!hold_used_ && p.forwarded > hold_after_) {
        hold_used_ = true;
        p.held = true;
        holding_ = true;
      }
      if (p.filtered) {
        p.pending.append(buf, static_cast<size_t>(n));
        return forward_filtered(p);
      }
      return write_all(to, buf, n);
    }
    if (p.held) {
      held_bytes_ += n;
      return true;
    }
    return write_all(to, buf, n);
  }

  void loop() {
    while (!stop_) {
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
      for (const Pair& p : pairs_) {
        fds.push_back({p.client, POLLIN, 0});
        fds.push_back({p.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 200) <= 0) continue;
      // A connection accepted now would add a pair that `fds` does not cover: accept after the
      // pairs polled (AddressSanitizer found the loop reading past `fds`).
      const bool incoming = fds[1].revents & POLLIN;
      for (size_t i = 0; i < pairs_.size();) {
        const pollfd& c = fds[2 + 2 * i];
        const pollfd& s = fds[2 + 2 * i + 1];
        bool alive = true;
        if (c.revents) alive = pass(pairs_[i], true);
        if (alive && s.revents) alive = pass(pairs_[i], false);
        if (alive) {
          ++i;
          continue;
        }
        ::close(pairs_[i].client);
        ::close(pairs_[i].server);
        pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(i));
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(2 + 2 * i), fds.begin() + static_cast<std::ptrdiff_t>(4 + 2 * i));
      }
      if (incoming) accept_one();
    }
  }

  int target_port_;
  int64_t hold_after_;
  int64_t rate_;  // bytes per second towards the target; 0: as fast as they come
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  std::vector<Pair> pairs_;  // only the relay's thread touches it until the destructor joins it
  bool hold_used_ = false;
  std::atomic<bool> stop_{false}, holding_{false};
  std::atomic<int64_t> held_bytes_{0};
  Pick drop_;
  std::atomic<int64_t> dropped_{0};
  std::atomic<bool> dropping_{true};
  std::thread thread_;
};

}  // namespace fednode::testing_network
