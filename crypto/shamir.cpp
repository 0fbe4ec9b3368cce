#include "crypto/shamir.h"

#include <stdexcept>
#include <string>

namespace fednode {
namespace {

uint8_t gf_mul(uint8_t a, uint8_t b) {
  // Constant time in the operands: a fixed 8 rounds, masks instead of branches, since the
  // operands are secret bytes and polynomial coefficients.
  uint8_t product = 0;
  for (int i = 0; i < 8; ++i) {
    product ^= static_cast<uint8_t>(-(b & 1)) & a;
    const uint8_t carry = static_cast<uint8_t>(-(a >> 7));
    a = static_cast<uint8_t>((a << 1) ^ (carry & 0x1b));
    b >>= 1;
  }
  return product;
}

uint8_t gf_inverse(uint8_t a) {
  // a^254 = a^-1 in GF(2^8): square-and-multiply over the fixed exponent (coordinates only,
  // which are public, but the fixed schedule costs nothing).
  uint8_t result = 1, base = a;
  for (int e = 254; e > 0; e >>= 1) {
    if (e & 1) result = gf_mul(result, base);
    base = gf_mul(base, base);
  }
  return result;
}

}  // namespace

std::vector<SecretShare> shamir_split(const SecretKey32& secret, int threshold, const std::vector<uint8_t>& xs,
                                      SecretRng& coefficients) {
  if (threshold < 1 || static_cast<size_t>(threshold) > xs.size())
    throw std::invalid_argument("shamir_split: threshold " + std::to_string(threshold) + " for " +
                                std::to_string(xs.size()) + " shares");
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] == 0) throw std::invalid_argument("shamir_split: coordinate 0 would be the secret itself");
    for (size_t j = 0; j < i; ++j)
      if (xs[j] == xs[i]) throw std::invalid_argument("shamir_split: coordinate " + std::to_string(xs[i]) + " twice");
  }
  // coeff[k][b]: coefficient of x^k for byte b; coeff[0] is the secret.
  std::vector<std::array<uint8_t, 32>> coeff(static_cast<size_t>(threshold));
  coeff[0] = secret;
  for (int k = 1; k < threshold; ++k)
    for (auto& c : coeff[static_cast<size_t>(k)]) c = static_cast<uint8_t>(coefficients.next());
  std::vector<SecretShare> shares(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    shares[i].x = xs[i];
    for (size_t b = 0; b < 32; ++b) {
      uint8_t y = 0;  // Horner, from the highest coefficient
      for (int k = threshold - 1; k >= 0; --k) y = static_cast<uint8_t>(gf_mul(y, xs[i]) ^ coeff[static_cast<size_t>(k)][b]);
      shares[i].y[b] = y;
    }
  }
  for (auto& c : coeff) c.fill(0);
  return shares;
}

SecretKey32 shamir_combine(const std::vector<SecretShare>& shares) {
  if (shares.empty()) throw std::invalid_argument("shamir_combine: no share");
  for (size_t i = 0; i < shares.size(); ++i) {
    if (shares[i].x == 0) throw std::invalid_argument("shamir_combine: a share at coordinate 0");
    for (size_t j = 0; j < i; ++j)
      if (shares[j].x == shares[i].x)
        throw std::invalid_argument("shamir_combine: coordinate " + std::to_string(shares[i].x) + " twice");
  }
  SecretKey32 secret{};
  for (size_t i = 0; i < shares.size(); ++i) {
    // Lagrange basis at 0: prod_{j != i} x_j / (x_j - x_i); subtraction is XOR in GF(2^8).
    uint8_t basis = 1;
    for (size_t j = 0; j < shares.size(); ++j)
      if (j != i) basis = gf_mul(basis, gf_mul(shares[j].x, gf_inverse(static_cast<uint8_t>(shares[j].x ^ shares[i].x))));
    for (size_t b = 0; b < 32; ++b) secret[b] ^= gf_mul(basis, shares[i].y[b]);
  }
  return secret;
}

}  // namespace fednode
