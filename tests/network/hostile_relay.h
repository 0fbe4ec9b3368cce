// A relay that misbehaves on purpose, for tests of what a relay cannot do (docs/deployment.md,
// "What a relay can do"): it joins circuits as `fednode relay` does (node/circuit.h), over plain
// TCP. Tamper harms the frames of at least `min_bytes` (knowledge; hellos, acks and receipts are
// smaller, and a relay sees sizes) on the circuits from a lower id to a higher one, where
// knowledge flows in a chain: the 1st is cut short by 16 bytes, the 2nd has one byte flipped, the
// 3rd is dropped, the 4th is held and sent after the 5th, which goes twice. After each cut,
// flip, drop and hold it tells the sender that the far end left (as a relay that lost frames
// would), so that the sender sends again and the run goes on. BlackHole drops every frame after
// each circuit's first, and tells nobody.
#pragma once

#include "node/circuit.h"

#include <zmq.hpp>

#include <atomic>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace fednode::testing_network {

class HostileRelay {
 public:
  enum class Mode { Tamper, BlackHole };
  struct Tally {
    int passed = 0, dropped = 0, duplicated = 0, cut = 0, flipped = 0, swapped = 0;
  };

  HostileRelay(int port, Mode mode, size_t min_bytes = 1000) : mode_(mode), min_bytes_(min_bytes) {
    router_.set(zmq::sockopt::router_mandatory, 1);
    router_.set(zmq::sockopt::router_handover, 1);
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:" + std::to_string(port));
    thread_ = std::thread([this] { loop(); });
  }
  ~HostileRelay() { finish(); }
  // Stops it; what it did.
  Tally finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return tally_;
  }

 private:
  using Route = std::pair<NodeId, NodeId>;

  void loop() {
    while (!stop_) {
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      retry_waiting();
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t id, frame;
      if (!router_.recv(id, zmq::recv_flags::dontwait)) continue;
      if (!id.more() || !router_.recv(frame)) continue;
      while (frame.more() && router_.recv(frame)) {
      }  // the rest of a multi-part message: not a frame of the protocol, dropped
      const auto route = parse_circuit_id(id.to_string_view());
      if (route) carry(*route, frame.to_string());
    }
  }

  void carry(const Route& r, std::string frame) {
    if (mode_ == Mode::BlackHole) {
      if (++seen_[r] == 1) send(r, frame);
      else ++tally_.dropped;
      return;
    }
    const int k = r.first < r.second && frame.size() >= min_bytes_ ? ++seen_[r] : 0;
    switch (k) {
      case 1: frame.resize(frame.size() - 16); send(r, frame); ++tally_.cut; note_left(r); return;
      case 2: frame[frame.size() / 2] ^= 0x20; send(r, frame); ++tally_.flipped; note_left(r); return;
      case 3: ++tally_.dropped; note_left(r); return;
      case 4: held_[r] = frame; note_left(r); return;
      case 5: send(r, frame); send(r, frame); send(r, held_[r]); ++tally_.duplicated; ++tally_.swapped; return;
      default: send(r, frame); ++tally_.passed; return;
    }
  }

  // To the far end of `r`; kept for later while it has not dialled in yet.
  void send(const Route& r, const std::string& frame) { waiting_.push_back({circuit_id(r.second, r.first), frame}); retry_waiting(); }

  // Tells r's sender that frames may have been lost, as node/relay.cpp does.
  void note_left(const Route& r) {
    note_.push_back(circuit_id(r.first, r.second));
    retry_waiting();
  }

  // Each destination in its own order, none waiting behind another: a frame for a node that has
  // already finished and left (the ack of a late duplicate) must not hold back every frame after
  // it, as one queue for all did once in CI (node 2 then never got node 1's knowledge). The real
  // relay keeps a queue per circuit (node/relay.cpp).
  void retry_waiting() {
    std::set<std::string> blocked;
    std::deque<std::pair<std::string, std::string>> still;
    for (auto& w : waiting_)
      if (blocked.count(w.first) || !offer(w.first, w.second, false)) {
        blocked.insert(w.first);
        still.push_back(std::move(w));
      }
    waiting_ = std::move(still);
    std::deque<std::string> notes;
    for (auto& to : note_)
      if (!offer(to, std::string(1, static_cast<char>(RelayNote::PeerLeft)), true)) notes.push_back(std::move(to));
    note_ = std::move(notes);
  }

  bool offer(const std::string& to, const std::string& body, bool note) {
    try {
      if (!router_.send(zmq::buffer(to), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
      if (note) router_.send(zmq::buffer(kRelayNoteTag), zmq::send_flags::sndmore);
      router_.send(zmq::buffer(body), zmq::send_flags::none);
      return true;
    } catch (const zmq::error_t&) {
      return false;  // not connected (yet)
    }
  }

  Mode mode_;
  size_t min_bytes_;
  zmq::context_t context_{1};
  zmq::socket_t router_{context_, zmq::socket_type::router};
  std::map<Route, int> seen_;
  std::map<Route, std::string> held_;
  std::deque<std::pair<std::string, std::string>> waiting_;
  std::deque<std::string> note_;
  Tally tally_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace fednode::testing_network
