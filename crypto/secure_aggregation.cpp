#include "crypto/secure_aggregation.h"

#include "crypto/errors.h"
#include "crypto/noise_key.h"
#include "crypto/secret_access.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace fednode {
namespace {

constexpr char kContext[] = "fednode/1 secagg mask";
constexpr size_t kEntriesPerBlock = 4096;  // 64 KiB of ChaCha20 output at a time

void put_le(uint8_t* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

MaskSeed self_mask_seed(const Identity& me, const RunId& run) {
  return derive_run_secret(me, "fednode/1 secagg self mask", run);
}

namespace {

// BLAKE2b-256(context || X25519(sk_me, pk_peer) || run || group tag || min id || max id): what
// both ends of a pair, and only they, can compute.
MaskSeed pair_secret(const char* context, const Identity& me, NodeId me_id, const PublicKey& peer, NodeId peer_id,
                     const RunId& run, uint64_t group_tag) {
  ensure_sodium();
  uint8_t q[crypto_scalarmult_BYTES];
  if (crypto_scalarmult(q, SecretKeyAccess::secret(me).data(), peer.bytes.data()) != 0) {
    sodium_memzero(q, sizeof q);
    throw SecurityError(SecurityCode::InvalidKey, "public key " + peer.to_hex() + " is a low-order point: no mask seed");
  }
  uint8_t tail[16];
  put_le(tail, group_tag, 8);
  put_le(tail + 8, std::min(me_id, peer_id), 4);
  put_le(tail + 12, std::max(me_id, peer_id), 4);
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, 32);
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(context), std::strlen(context));
  crypto_generichash_update(&st, q, sizeof q);
  crypto_generichash_update(&st, run.bytes.data(), run.bytes.size());
  crypto_generichash_update(&st, tail, sizeof tail);
  MaskSeed seed;
  crypto_generichash_final(&st, seed.data(), seed.size());
  sodium_memzero(q, sizeof q);
  sodium_memzero(&st, sizeof st);
  return seed;
}

void hash_ids(crypto_generichash_state* st, const Contributors& ids) {
  uint8_t count[4], id[4];
  put_le(count, ids.size(), 4);
  crypto_generichash_update(st, count, sizeof count);
  for (NodeId n : ids) {
    put_le(id, n, 4);
    crypto_generichash_update(st, id, sizeof id);
  }
}

}  // namespace

MaskSeed pairwise_mask_seed(const Identity& me, NodeId me_id, const PublicKey& peer, NodeId peer_id, const RunId& run,
                            uint64_t group_tag) {
  return pair_secret(kContext, me, me_id, peer, peer_id, run, group_tag);
}

MaskSeed consistency_key(const Identity& me, NodeId me_id, const PublicKey& peer, NodeId peer_id, const RunId& run,
                         uint64_t group_tag) {
  return pair_secret("fednode/1 secagg consistency", me, me_id, peer, peer_id, run, group_tag);
}

ConsistencyTag consistency_tag(const MaskSeed& key, NodeId from, NodeId to, const Contributors& survivors,
                               const Contributors& dropped) {
  ensure_sodium();
  uint8_t ends[8];
  put_le(ends, from, 4);
  put_le(ends + 4, to, 4);
  crypto_generichash_state st;
  crypto_generichash_init(&st, key.data(), key.size(), 32);
  crypto_generichash_update(&st, ends, sizeof ends);
  hash_ids(&st, survivors);
  hash_ids(&st, dropped);
  ConsistencyTag tag;
  crypto_generichash_final(&st, tag.data(), tag.size());
  return tag;
}

bool tags_equal(const ConsistencyTag& a, const ConsistencyTag& b) { return sodium_memcmp(a.data(), b.data(), a.size()) == 0; }

void apply_mask(const MaskSeed& seed, uint64_t stream, Ring128* values, size_t n, bool subtract) {
  ensure_sodium();
  static_assert(sizeof(Ring128) == 16, "a ring element is 16 bytes");
  const std::vector<uint8_t> zeros(std::min(n, kEntriesPerBlock) * 16, 0);
  std::vector<uint8_t> block(zeros.size());
  uint8_t nonce[crypto_stream_chacha20_ietf_NONCEBYTES] = {};
  put_le(nonce + 4, stream, 8);
  if (n / 4 >= (size_t{1} << 32)) throw std::length_error("apply_mask: beyond one ChaCha20 stream");
  for (size_t first = 0; first < n; first += kEntriesPerBlock) {
    const size_t count = std::min(kEntriesPerBlock, n - first);
    // Entry k's bytes are at stream offset 16k: the 64-byte ChaCha20 block counter starts at
    // first / 4 (kEntriesPerBlock is a multiple of 4, so blocks never straddle).
    crypto_stream_chacha20_ietf_xor_ic(block.data(), zeros.data(), count * 16, nonce, static_cast<uint32_t>(first / 4),
                                       seed.data());
    for (size_t k = 0; k < count; ++k) {
      uint64_t lo, hi;
      std::memcpy(&lo, block.data() + 16 * k, 8);
      std::memcpy(&hi, block.data() + 16 * k + 8, 8);
      const Ring128 mask = ring_from_words(lo, hi);
      values[first + k] = subtract ? values[first + k] - mask : values[first + k] + mask;
    }
  }
  sodium_memzero(block.data(), block.size());
}

void add_pairwise_masks(Ring128* values, size_t n, uint64_t stream, const Identity& me, NodeId me_id,
                        const std::map<NodeId, PublicKey>& group, const RunId& run, uint64_t group_tag) {
  if (!group.count(me_id)) throw std::logic_error("add_pairwise_masks: the node is not in its own group");
  for (const auto& [peer_id, peer] : group) {
    if (peer_id == me_id) continue;
    MaskSeed seed = pairwise_mask_seed(me, me_id, peer, peer_id, run, group_tag);
    apply_mask(seed, stream, values, n, /*subtract=*/peer_id < me_id);
    sodium_memzero(seed.data(), seed.size());
  }
}

}  // namespace fednode
