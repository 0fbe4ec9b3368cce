// For tests that play one node of a federation by hand over a real socket, as another
// implementation of docs/protocol.md would: its knowledge computed exactly as `fednode run`
// computes it, the topology's public keys, and one frame sent with the answer that comes back.
#pragma once

#include "federation.h"

#include "features/idx.h"
#include "features/partition.h"
#include "methods/method.h"
#include "node/secure_channel.h"

#include <zmq.hpp>

#include <optional>
#include <string>

namespace fednode::testing_network {

// Node `id`'s FedCGS knowledge of a federation on Fashion-MNIST pixels whose data options are
// `train-limit` and an iid partition.
inline Knowledge played_knowledge(const Federation& f, NodeId id) {
  const int train_limit = std::stoi(f.data.at("train-limit"));
  Features train = load_fashion_mnist(default_fashion_mnist_dir(), "train", train_limit);
  PartitionOptions p;
  p.nodes = static_cast<int>(f.topology.nodes.size());
  p.seed = f.seed;
  const Partition parts = make_partition(train.y, train.num_classes, p);
  MethodOptions m;
  m.method = "fedcgs";
  NodeContext ctx;
  ctx.node = id;
  ctx.seed = f.seed;
  ctx.backbone_fingerprint = "pixels";
  ctx.num_classes = train.num_classes;
  ctx.dim = static_cast<int>(train.dim());
  return make_method(m)->summarize(train.subset(parts[id]), ctx);
}

inline PeerKeys keys_of(const Topology& t) {
  PeerKeys keys;
  for (const auto& n : t.nodes) keys[n.id] = PublicKey{*n.public_key};
  return keys;
}

// The next frame on `s` within `ms`, if one comes.
inline std::optional<std::string> receive_frame(zmq::socket_t& s, int ms) {
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(ms)) <= 0) return std::nullopt;
  zmq::message_t m;
  if (!s.recv(m)) return std::nullopt;
  return m.to_string();
}

// Sends one frame on `s` and returns the reply frame, if one comes within `ms`.
inline std::optional<std::string> exchange(zmq::socket_t& s, const std::string& frame, int ms = 3000) {
  s.send(zmq::buffer(frame), zmq::send_flags::none);
  return receive_frame(s, ms);
}

}  // namespace fednode::testing_network
