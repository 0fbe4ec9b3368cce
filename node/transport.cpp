#include "node/transport.h"

#include <zmq.hpp>

#include <vector>

namespace fednode {

struct Transport::Impl {
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  struct Peer {
    std::string address;
    std::unique_ptr<zmq::socket_t> dealer;  // connected on first send
  };
  std::map<NodeId, Peer> peers;
  TransportOptions options;

  void common_options(zmq::socket_t& s) {
    s.set(zmq::sockopt::linger, options.linger_ms);
    s.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(options.max_message_bytes));
    s.set(zmq::sockopt::heartbeat_ivl, options.heartbeat_ivl_ms);
    s.set(zmq::sockopt::heartbeat_timeout, options.heartbeat_timeout_ms);
    s.set(zmq::sockopt::heartbeat_ttl, options.heartbeat_timeout_ms);
    s.set(zmq::sockopt::reconnect_ivl, 100);
    s.set(zmq::sockopt::reconnect_ivl_max, 2000);
  }

  zmq::socket_t& dealer(NodeId peer) {
    auto it = peers.find(peer);
    if (it == peers.end()) throw InputError("transport: no address for node " + std::to_string(peer));
    if (!it->second.dealer) {
      auto s = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
      common_options(*s);
      // No ZMQ_IMMEDIATE: with it, libzmq discards what a peer sent on a connection that then
      // closes before this node read it (a leaf's last ack, as it exits), which left a 32-node
      // star's hub waiting for acknowledgements already sent. Without it a frame for a peer that
      // is down waits in the queue; a high-water mark of 1 keeps resends from stacking copies
      // of a large frame there (a resend finds the queue full and is simply tried again later).
      s->set(zmq::sockopt::sndhwm, 1);
      try {
        s->connect(it->second.address);
      } catch (const zmq::error_t& e) {
        throw InputError("cannot connect to node " + std::to_string(peer) + " at '" + it->second.address +
                         "': " + e.what());
      }
      it->second.dealer = std::move(s);
    }
    return *it->second.dealer;
  }

  // Reads one whole (possibly multi-part) message; the parts after the first `skip` are the data.
  static std::vector<zmq::message_t> read_all(zmq::socket_t& s) {
    std::vector<zmq::message_t> parts;
    do {
      zmq::message_t m;
      if (!s.recv(m, zmq::recv_flags::dontwait)) break;
      parts.push_back(std::move(m));
    } while (parts.back().more());
    return parts;
  }
};

Transport::Transport(NodeId, const std::string& bind_address, TransportOptions options)
    : impl_(std::make_unique<Impl>()), bind_address_(bind_address) {
  impl_->options = options;
  impl_->common_options(impl_->router);
  impl_->router.set(zmq::sockopt::router_mandatory, 1);
  try {
    impl_->router.bind(bind_address);
  } catch (const zmq::error_t& e) {
    throw InputError("cannot listen on '" + bind_address + "': " + e.what());
  }
}

Transport::~Transport() = default;

void Transport::add_peer(NodeId peer, const std::string& address) {
  auto& p = impl_->peers[peer];
  if (p.address != address) {
    p.address = address;
    p.dealer.reset();
  }
}

bool Transport::send(NodeId peer, const std::string& frame) {
  auto& s = impl_->dealer(peer);
  zmq::message_t m(frame.data(), frame.size());
  return s.send(m, zmq::send_flags::dontwait).has_value();
}

bool Transport::reply(const Incoming& in, const std::string& frame) {
  try {
    if (in.via_dealer) return send(*in.via_dealer, frame);
    zmq::message_t id(in.route.data(), in.route.size());
    zmq::message_t m(frame.data(), frame.size());
    if (!impl_->router.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    return impl_->router.send(m, zmq::send_flags::dontwait).has_value();
  } catch (const zmq::error_t& e) {
    if (e.num() == EHOSTUNREACH) return false;  // the connection closed since the frame came in
    throw;
  }
}

std::optional<Incoming> Transport::receive(std::chrono::milliseconds timeout) {
  std::vector<zmq::pollitem_t> items;
  std::vector<NodeId> owners;
  items.push_back({impl_->router.handle(), 0, ZMQ_POLLIN, 0});
  for (auto& [id, p] : impl_->peers)
    if (p.dealer) {
      items.push_back({p.dealer->handle(), 0, ZMQ_POLLIN, 0});
      owners.push_back(id);
    }
  try {
    zmq::poll(items.data(), items.size(), timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return std::nullopt;  // a signal: let the caller look at its stop flag
    throw;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (!(items[i].revents & ZMQ_POLLIN)) continue;
    zmq::socket_t& s = i == 0 ? impl_->router : *impl_->peers[owners[i - 1]].dealer;
    auto parts = Impl::read_all(s);
    const size_t envelope = i == 0 ? 1 : 0;  // the ROUTER prepends the routing id
    // Frames are single-part (docs/protocol.md, section 2); anything else is dropped here, as
    // the opening checks would drop a malformed frame.
    if (parts.size() != envelope + 1) continue;
    Incoming in;
    in.frame.assign(parts.back().data<char>(), parts.back().size());
    if (i == 0)
      in.route.assign(parts[0].data<char>(), parts[0].size());
    else
      in.via_dealer = owners[i - 1];
    return in;
  }
  return std::nullopt;
}

}  // namespace fednode
