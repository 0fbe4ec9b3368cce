// XChaCha20-Poly1305-IETF, the AEAD that seals every message (docs/protocol.md, "Sealing"), with
// the ciphertext and its tag apart ("detached"). The bytes are libsodium's
// crypto_aead_xchacha20poly1305_ietf_*_detached, exactly; tests/crypto/test_aead.cpp compares.
//
// Why not call those functions alone: they run the ChaCha20 keystream and the Poly1305 MAC one
// after the other on one core, and for a multi-megabyte FedPFT message the two are a third of
// a hop. Above kParallelAeadBytes this file builds the same construction from libsodium's own
// primitives (HChaCha20, ChaCha20-IETF with a block counter, Poly1305) and runs the keystream
// and the MAC side by side on the worker pool (core/parallel.h), segment by segment: the MAC
// follows the encryption, and on opening the decryption follows the MAC, so that decrypting in
// place never overwrites a segment the MAC has not read yet. With one thread the two run one
// after the other, as libsodium does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fednode::aead {

constexpr size_t kKeyBytes = 32;
constexpr size_t kNonceBytes = 24;
constexpr size_t kTagBytes = 16;
constexpr size_t kParallelAeadBytes = size_t{1} << 20;

// Writes the ciphertext of in[0, size) to out and its tag. out is in (in place) or does not
// overlap it; the same holds for decrypt.
void encrypt(uint8_t* out, const uint8_t* in, size_t size, std::string_view ad, const uint8_t nonce[kNonceBytes],
             const uint8_t key[kKeyBytes], uint8_t tag[kTagBytes]);

// Checks `tag` over `ad` and in[0, size) and writes the plaintext to out (out == in decrypts in
// place). False when the tag does not verify; out is then all zeros, as libsodium leaves it.
[[nodiscard]] bool decrypt(uint8_t* out, const uint8_t* in, size_t size, std::string_view ad,
                           const uint8_t nonce[kNonceBytes], const uint8_t key[kKeyBytes], const uint8_t tag[kTagBytes]);

}  // namespace fednode::aead
