// CurveZMQ on each hop (docs/security.md, "Layer 2"): a node's X25519 identity is also its
// CurveZMQ key pair — both are Curve25519 crypto_box keys — so the keys the topology already
// lists authenticate the TCP connections too, and no second key pair exists to distribute.
//
// The secret key goes from here straight into libzmq (zmq_setsockopt) as 32 binary bytes; it is
// never encoded (Z85) or copied anywhere else outside crypto/. libzmq keeps its own copy in the
// socket's options for as long as the socket lives, which fednode cannot wipe.
#pragma once

#include "crypto/keys.h"

#include <string>

namespace fednode {

// The ZAP domain fednode's CURVE servers announce; a ZAP handler sees it in every request.
constexpr const char* kCurveZapDomain = "fednode";

// Whether the linked libzmq was built with CURVE (zmq_has("curve")).
bool curve_available();

// The node's key pair, kept for the sockets the transport opens later (a DEALER is opened on the
// first send to its peer, long after the identity was handed to the secure channel). Holds its
// own copy of the secret key, wiped with sodium_memzero when destroyed; nothing reads it but the
// two calls below.
class CurveKeyPair {
 public:
  // Throws InputError when libzmq lacks CURVE, so that a node never runs a "curve" topology
  // without it.
  explicit CurveKeyPair(const Identity& identity);
  ~CurveKeyPair();
  CurveKeyPair(const CurveKeyPair&) = delete;
  CurveKeyPair& operator=(const CurveKeyPair&) = delete;

  const PublicKey& public_key() const { return public_; }

  // `zmq_socket` is a libzmq socket handle (zmq::socket_t::handle()), not yet bound or connected.
  // Server: ZMQ_CURVE_SERVER with this node's secret key and ZAP domain kCurveZapDomain.
  void make_server(void* zmq_socket) const;
  // Client: this node's key pair, and `server` as the key the server must prove it holds.
  void make_client(void* zmq_socket, const PublicKey& server) const;

 private:
  std::array<uint8_t, kKeyBytes> secret_{};
  PublicKey public_;
};

}  // namespace fednode
