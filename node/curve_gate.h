// Who may connect to a node's ROUTER over CurveZMQ: the ZAP handler (ZeroMQ RFC 27) of its
// context, admitting the keys its topology lists and refusing every other, each refusal counted
// and the 1st, 10th, 100th ... of each key logged, so that a client retrying every 100 ms does not
// fill the log and a flood of fresh keys costs no memory.
#pragma once

#include "crypto/curve.h"

#include <zmq.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace fednode {

class CurveGate {
 public:
  // Binds the handler in `context`. libzmq looks it up for every handshake and without one would
  // admit every CURVE client that knows the node's public key: make it before the ROUTER binds.
  CurveGate(zmq::context_t& context, const std::map<NodeId, PublicKey>& allowed,
            std::function<void(const std::string&)> log);

  // The REP socket, for the transport's poll.
  zmq::socket_t& socket() { return socket_; }
  // Answers every request waiting, each with exactly one reply (as REP requires).
  void answer_waiting();
  int64_t refusals() const { return refusals_; }

 private:
  void answer_one();
  void note_refusal(const std::optional<PublicKey>& key, const std::string& address, const std::string& reason);

  zmq::socket_t socket_;
  std::map<PublicKey, NodeId> allowed_;
  std::function<void(const std::string&)> log_;
  std::map<PublicKey, int64_t> refused_by_key_;
  int64_t refused_untracked_ = 0, refusals_ = 0;
};

}  // namespace fednode
