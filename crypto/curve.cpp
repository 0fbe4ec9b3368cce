#include "crypto/curve.h"

#include "crypto/secret_access.h"

#include <sodium.h>
#include <zmq.h>

#include <algorithm>
#include <cstring>

namespace fednode {
namespace {

// libzmq takes a CURVE key as 32 binary bytes or 40 Z85 characters; binary needs no encoded copy
// of the secret in between.
void set_key(void* socket, int option, const uint8_t* key, const char* what) {
  if (zmq_setsockopt(socket, option, key, kKeyBytes) != 0)
    throw InputError(std::string("CurveZMQ: cannot set the ") + what + ": " + zmq_strerror(zmq_errno()));
}

void set_int(void* socket, int option, int value, const char* what) {
  if (zmq_setsockopt(socket, option, &value, sizeof value) != 0)
    throw InputError(std::string("CurveZMQ: cannot set ") + what + ": " + zmq_strerror(zmq_errno()));
}

}  // namespace

bool curve_available() { return zmq_has("curve") != 0; }

CurveKeyPair::CurveKeyPair(const Identity& identity) : public_(identity.public_key()) {
  ensure_sodium();
  if (!curve_available())
    throw InputError("hop_encryption = \"curve\" needs a libzmq built with CURVE support; this one has none");
  const auto& secret = SecretKeyAccess::secret(identity);
  std::copy(secret.begin(), secret.end(), secret_.begin());
}

CurveKeyPair::~CurveKeyPair() { sodium_memzero(secret_.data(), secret_.size()); }

void CurveKeyPair::make_server(void* socket) const {
  set_int(socket, ZMQ_CURVE_SERVER, 1, "the CURVE server role");
  set_key(socket, ZMQ_CURVE_SECRETKEY, secret_.data(), "node's secret key");
  if (zmq_setsockopt(socket, ZMQ_ZAP_DOMAIN, kCurveZapDomain, std::strlen(kCurveZapDomain)) != 0)
    throw InputError(std::string("CurveZMQ: cannot set the ZAP domain: ") + zmq_strerror(zmq_errno()));
}

void CurveKeyPair::make_client(void* socket, const PublicKey& server) const {
  set_key(socket, ZMQ_CURVE_SERVERKEY, server.bytes.data(), "peer's public key");
  set_key(socket, ZMQ_CURVE_PUBLICKEY, public_.bytes.data(), "node's public key");
  set_key(socket, ZMQ_CURVE_SECRETKEY, secret_.data(), "node's secret key");
}

}  // namespace fednode
