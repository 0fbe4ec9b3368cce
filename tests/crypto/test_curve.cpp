// CurveKeyPair: a node's identity as libzmq's CURVE key pair. libzmq's own key arithmetic
// (zmq_curve_public) must agree that the secret it was given belongs to the node's public key.
#include "crypto/curve.h"

#include <gtest/gtest.h>
#include <sodium.h>
#include <zmq.h>

#include <type_traits>

namespace fednode {
namespace {

static_assert(!std::is_copy_constructible_v<CurveKeyPair>, "the secret copy is not copied further");

std::array<uint8_t, 32> seed(uint8_t b) {
  std::array<uint8_t, 32> s;
  s.fill(b);
  return s;
}

std::array<uint8_t, 32> key_option(void* socket, int option) {
  std::array<uint8_t, 32> k{};
  size_t size = k.size();
  EXPECT_EQ(zmq_getsockopt(socket, option, k.data(), &size), 0) << zmq_strerror(zmq_errno());
  EXPECT_EQ(size, 32u);
  return k;
}

struct Context {
  void* ctx = zmq_ctx_new();
  ~Context() { zmq_ctx_term(ctx); }
};
struct Socket {
  void* s;
  Socket(void* ctx, int type) : s(zmq_socket(ctx, type)) {}
  ~Socket() { zmq_close(s); }
};

TEST(Curve, LibzmqHasCurve) { EXPECT_TRUE(curve_available()); }

TEST(Curve, ClientGetsTheIdentitysKeyPairAndTheServersKey) {
  const Identity me = Identity::from_seed(seed(1));
  const Identity server = Identity::from_seed(seed(2));
  const CurveKeyPair keys(me);
  EXPECT_EQ(keys.public_key(), me.public_key());

  Context c;
  Socket dealer(c.ctx, ZMQ_DEALER);
  keys.make_client(dealer.s, server.public_key());
  EXPECT_EQ(key_option(dealer.s, ZMQ_CURVE_PUBLICKEY), me.public_key().bytes);
  EXPECT_EQ(key_option(dealer.s, ZMQ_CURVE_SERVERKEY), server.public_key().bytes);
  int mechanism = 0;
  size_t size = sizeof mechanism;
  ASSERT_EQ(zmq_getsockopt(dealer.s, ZMQ_MECHANISM, &mechanism, &size), 0);
  EXPECT_EQ(mechanism, ZMQ_CURVE);

  // The secret libzmq holds is the identity's: libzmq derives the identity's public key from it.
  std::array<uint8_t, 32> secret = key_option(dealer.s, ZMQ_CURVE_SECRETKEY);
  char secret_z85[41], public_z85[41];
  ASSERT_NE(zmq_z85_encode(secret_z85, secret.data(), secret.size()), nullptr);
  ASSERT_EQ(zmq_curve_public(public_z85, secret_z85), 0);
  std::array<uint8_t, 32> derived{};
  ASSERT_NE(zmq_z85_decode(derived.data(), public_z85), nullptr);
  EXPECT_EQ(derived, me.public_key().bytes);
  sodium_memzero(secret.data(), secret.size());
  sodium_memzero(secret_z85, sizeof secret_z85);
}

TEST(Curve, ServerIsACurveServerInFednodesZapDomain) {
  const Identity me = Identity::from_seed(seed(3));
  const CurveKeyPair keys(me);
  Context c;
  Socket router(c.ctx, ZMQ_ROUTER);
  keys.make_server(router.s);
  int is_server = 0;
  size_t size = sizeof is_server;
  ASSERT_EQ(zmq_getsockopt(router.s, ZMQ_CURVE_SERVER, &is_server, &size), 0);
  EXPECT_EQ(is_server, 1);
  char domain[64] = {};
  size = sizeof domain;
  ASSERT_EQ(zmq_getsockopt(router.s, ZMQ_ZAP_DOMAIN, domain, &size), 0);
  EXPECT_STREQ(domain, kCurveZapDomain);
  std::array<uint8_t, 32> secret = key_option(router.s, ZMQ_CURVE_SECRETKEY);
  std::array<uint8_t, 32> derived{};
  ASSERT_EQ(crypto_scalarmult_base(derived.data(), secret.data()), 0);
  EXPECT_EQ(derived, me.public_key().bytes);
  sodium_memzero(secret.data(), secret.size());
}

}  // namespace
}  // namespace fednode
