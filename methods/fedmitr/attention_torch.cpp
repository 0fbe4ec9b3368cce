// Part of libfednode_torch.so (core/torch_library.h): the ViT's self-attention, fused
// (attention_torch.h). The loops keep their innermost index contiguous and their sums in separate
// accumulators, so that the compiler vectorises them without reordering any sum, and keeps a
// register's worth of sums in a register.
#include "methods/fedmitr/attention_torch.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace fednode {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Where one (sequence, head) reads its queries, keys and values, and which tokens are keys.
struct Head {
  const float* qkv;     // the sequence's [N, 3 * D]
  const uint8_t* keys;  // [N], or null: every token is a key
  int64_t N, D, dh, offset;  // offset: the head's first column within q, k and v

  const float* q(int64_t token) const { return qkv + token * 3 * D + offset; }
  const float* k(int64_t token) const { return q(token) + D; }
  const float* v(int64_t token) const { return q(token) + 2 * D; }
  bool key(int64_t token) const { return keys == nullptr || keys[token] != 0; }
};

// A head's rows of scores are padded to a multiple of kLanes (one AVX2 register of floats), so
// that their loops have no remainder; the padding is never a key. The loops work on `Lanes`, a
// GCC vector of that many floats: the compiler left the plain loops scalar.
constexpr int64_t kLanes = 8;
// Every function taking or returning Lanes is inlined into the clones below: no call crosses the
// ABI that GCC warns about for the baseline build.
#pragma GCC diagnostic ignored "-Wpsabi"
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
using LaneBits = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));
int64_t padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

#define FEDNODE_INLINE inline __attribute__((always_inline))

FEDNODE_INLINE Lanes load(const float* from) {
  Lanes v;
  std::memcpy(&v, from, sizeof v);
  return v;
}
FEDNODE_INLINE void store(float* to, Lanes v) { std::memcpy(to, &v, sizeof v); }
FEDNODE_INLINE Lanes splat(float x) { return Lanes{} + x; }
// The lanes' sum, always in the same order.
FEDNODE_INLINE float sum_lanes(Lanes v) {
  float total = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) total += v[l];
  return total;
}

// What one thread's heads work in: [dh, padded N] keys or values transposed; one row of scores;
// per key, 0 or -inf (`key_bias`, added to the scores) and 1 or 0 (`key_weight`, applied to
// e^score); and the [N, padded N] score gradients of the backward pass.
struct Scratch {
  std::vector<float> transposed, row, key_bias, key_weight, score_grads;
  Scratch(int64_t N, int64_t dh)
      : transposed(static_cast<size_t>(dh * padded(N)), 0.0f),
        row(static_cast<size_t>(padded(N))),
        key_bias(static_cast<size_t>(padded(N))),
        key_weight(static_cast<size_t>(padded(N))),
        score_grads(static_cast<size_t>(N * padded(N))) {}
};

// `to` [dh, padded N] = the head's keys or values (`which` 1 or 2), transposed (the padding stays
// 0): a query's scores are then sums over d of contiguous rows, which vectorise over the keys.
FEDNODE_INLINE void transpose_head(const Head& h, int which, float* to) {
  const int64_t NP = padded(h.N);
  for (int64_t j = 0; j < h.N; ++j) {
    const float* from = h.q(j) + which * h.D;
    for (int64_t d = 0; d < h.dh; ++d) to[d * NP + j] = from[d];
  }
}

// row[j] = sum_d a[d] * t[d, j] over the padded width of `t` [dh, NP], a register's keys at a time.
template <int DH>
FEDNODE_INLINE void scores_row(const float* a, const float* t, int64_t dh, int64_t NP, float* row) {
  const int64_t depth = DH > 0 ? DH : dh;
  for (int64_t first = 0; first < NP; first += kLanes) {
    Lanes sums{};
    for (int64_t d = 0; d < depth; ++d) sums += a[d] * load(t + d * NP + first);
    store(row + first, sums);
  }
}

// out[0, dh) = sum over t < n of weight(t) * vector(t)[0, dh), summed in registers when the
// head dimension is a multiple of kLanes known to the compiler.
template <int DH, typename Weight, typename Vector>
FEDNODE_INLINE void weighted_sum(int64_t n, int64_t dh, const Weight& weight, const Vector& vector, float* out) {
  if constexpr (DH > 0 && DH % kLanes == 0) {
    Lanes sums[DH / kLanes] = {};
    for (int64_t t = 0; t < n; ++t) {
      const float w = weight(t);
      const float* v = vector(t);
      for (int64_t c = 0; c < DH / kLanes; ++c) sums[c] += w * load(v + c * kLanes);
    }
    for (int64_t c = 0; c < DH / kLanes; ++c) store(out + c * kLanes, sums[c]);
  } else {
    std::fill_n(out, dh, 0.0f);
    for (int64_t t = 0; t < n; ++t) {
      const float w = weight(t);
      const float* v = vector(t);
      for (int64_t d = 0; d < dh; ++d) out[d] += w * v[d];
    }
  }
}

// e^x for x <= 0 (a score less its row's largest), within 2 ulp: Cephes' expf on a register of
// lanes. Below -87, e^x (< 2e-38) is taken as e^-87, which only a token that is no key reaches
// (its weight then makes it 0) or one that nothing beside the row's largest (term 1) notices.
FEDNODE_INLINE Lanes exp_nonpositive(Lanes x) {
  x = x < -87.0f ? splat(-87.0f) : x;
  const Lanes round = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const Lanes n = (x * 1.44269504088896341f + round) - round;
  const Lanes r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  Lanes p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const LaneBits bits = (__builtin_convertvector(n, LaneBits) + 127) << 23;  // 2^n, n in [-126, 0]
  Lanes two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// Which tokens of the head's sequence are keys, as the softmax reads them.
FEDNODE_INLINE void key_rows(const Head& h, Scratch& w) {
  for (int64_t j = 0; j < padded(h.N); ++j) {
    const bool key = j < h.N && h.key(j);
    w.key_bias[static_cast<size_t>(j)] = key ? 0.0f : -std::numeric_limits<float>::infinity();
    w.key_weight[static_cast<size_t>(j)] = key ? 1.0f : 0.0f;
  }
}

// The row of scores `row` [NP] into the query's attention over the keys: scaled, softmax over the
// keys, 0 for a token that is no key and for the padding.
FEDNODE_INLINE void softmax_row(int64_t NP, float scale, const Scratch& w, float* row) {
  Lanes top = splat(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < NP; j += kLanes) {
    const Lanes v = load(row + j) * scale + load(w.key_bias.data() + j);
    store(row + j, v);
    top = top > v ? top : v;
  }
  float largest = top[0];
  for (int64_t l = 1; l < kLanes; ++l) largest = std::max(largest, top[l]);
  Lanes sums{};
  for (int64_t j = 0; j < NP; j += kLanes) {
    const Lanes e = exp_nonpositive(load(row + j) - largest) * load(w.key_weight.data() + j);
    store(row + j, e);
    sums += e;
  }
  const float inverse = 1.0f / sum_lanes(sums);
  for (int64_t j = 0; j < NP; j += kLanes) store(row + j, load(row + j) * inverse);
}

template <int DH>
FEDNODE_INLINE void forward_head_for(const Head& h, float scale, float* probabilities, float* mixed, Scratch& w) {
  const int64_t N = h.N, NP = padded(N);
  float* kt = w.transposed.data();
  float* row = w.row.data();
  transpose_head(h, 1, kt);
  key_rows(h, w);
  for (int64_t i = 0; i < N; ++i) {
    scores_row<DH>(h.q(i), kt, h.dh, NP, row);
    softmax_row(NP, scale, w, row);
    std::copy_n(row, N, probabilities + i * N);
    weighted_sum<DH>(
        N, h.dh, [&](int64_t j) { return row[j]; }, [&](int64_t j) { return h.v(j); }, mixed + i * h.D + h.offset);
  }
}

// With d the gradient of the head's output [N, dh] (rows of `grad`, D apart) and P its attention:
// dV = P^T d; dP = d V^T; dS = P * (dP - rowsum(P * dP)) * scale; dQ = dS K; dK = dS^T Q. Each
// head writes its own columns of q, k and v for every token, each once.
template <int DH>
FEDNODE_INLINE void backward_head_for(const Head& h, float scale, const float* probabilities, const float* grad,
                                      float* grad_qkv, Scratch& w) {
  const int64_t N = h.N, NP = padded(N), D = h.D;
  float* vt = w.transposed.data();
  float* ds = w.score_grads.data();
  transpose_head(h, 2, vt);
  const auto g = [&](int64_t i) { return grad + i * D + h.offset; };
  for (int64_t i = 0; i < N; ++i) {
    const float* p = probabilities + i * N;
    float* dsi = ds + i * NP;
    scores_row<DH>(g(i), vt, h.dh, NP, dsi);
    float expected = 0.0f;
    for (int64_t j = 0; j < N; ++j) expected += p[j] * dsi[j];
    for (int64_t j = 0; j < N; ++j) dsi[j] = p[j] * (dsi[j] - expected) * scale;
    weighted_sum<DH>(
        N, h.dh, [&](int64_t j) { return dsi[j]; }, [&](int64_t j) { return h.k(j); },
        grad_qkv + i * 3 * D + h.offset);
  }
  for (int64_t j = 0; j < N; ++j) {
    weighted_sum<DH>(
        N, h.dh, [&](int64_t i) { return ds[i * NP + j]; }, [&](int64_t i) { return h.q(i); },
        grad_qkv + j * 3 * D + D + h.offset);
    weighted_sum<DH>(
        N, h.dh, [&](int64_t i) { return probabilities[i * N + j]; }, g, grad_qkv + j * 3 * D + 2 * D + h.offset);
  }
}

// Built twice, for AVX2 with FMA and for the baseline x86-64, the loader picking one per machine
// (target_clones); the ViT's heads of 16 dimensions get loops of known length, others the general.
#define FEDNODE_ATTENTION_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))

FEDNODE_ATTENTION_CLONES void forward_head(const Head& h, float scale, float* probabilities, float* mixed,
                                           Scratch& w) {
  if (h.dh == 16)
    forward_head_for<16>(h, scale, probabilities, mixed, w);
  else
    forward_head_for<0>(h, scale, probabilities, mixed, w);
}

FEDNODE_ATTENTION_CLONES void backward_head(const Head& h, float scale, const float* probabilities, const float* grad,
                                            float* grad_qkv, Scratch& w) {
  if (h.dh == 16)
    backward_head_for<16>(h, scale, probabilities, grad, grad_qkv, w);
  else
    backward_head_for<0>(h, scale, probabilities, grad, grad_qkv, w);
}

// Calls `work(rh, head, scratch)` for every (sequence r, head h), rh = r * heads + h, shared among
// LibTorch's threads; `qkv` [R, N, 3 * D], `key_rows` [K, N] or null. A head is about 10 000
// multiply-adds at the ViT's sizes: enough to share in runs of 32.
template <typename Work>
void each_head(const float* qkv, const uint8_t* key_rows, int64_t K, int64_t R, int64_t N, int64_t D, int64_t heads,
               const Work& work) {
  const int64_t dh = D / heads;
  at::parallel_for(0, R * heads, 32, [&](int64_t begin, int64_t end) {
    Scratch scratch(N, dh);
    for (int64_t rh = begin; rh < end; ++rh) {
      const int64_t r = rh / heads;
      const Head head{qkv + r * N * 3 * D, key_rows ? key_rows + (r % K) * N : nullptr, N, D, dh, (rh % heads) * dh};
      work(rh, head, scratch);
    }
  });
}

class FusedAttention : public torch::autograd::Function<FusedAttention> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& qkv_in, int64_t heads,
                               const torch::Tensor& keys_in) {
    const torch::Tensor qkv = qkv_in.contiguous();
    const int64_t R = qkv.size(0), N = qkv.size(1), D = qkv.size(2) / 3, dh = D / heads;
    const bool masked = keys_in.numel() > 0;  // an empty tensor: every token is a key
    const torch::Tensor keys = masked ? keys_in.to(torch::kUInt8).contiguous() : keys_in;
    const int64_t K = masked ? keys.size(0) : 1;
    torch::Tensor mixed = torch::empty({R, N, D}, qkv.options());
    torch::Tensor probabilities = torch::empty({R, heads, N, N}, qkv.options());
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    const float* in = qkv.data_ptr<float>();
    const uint8_t* key_rows = masked ? keys.data_ptr<uint8_t>() : nullptr;
    float* out = mixed.data_ptr<float>();
    float* prob = probabilities.data_ptr<float>();
    each_head(in, key_rows, K, R, N, D, heads, [&](int64_t rh, const Head& head, Scratch& scratch) {
      forward_head(head, scale, prob + rh * N * N, out + rh / heads * N * D, scratch);
    });
    ctx->save_for_backward({qkv, probabilities});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["keys"] = keys;
    ctx->mark_non_differentiable({probabilities});
    return {mixed, probabilities};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& qkv = saved[0];
    const torch::Tensor& probabilities = saved[1];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const torch::Tensor keys = ctx->saved_data["keys"].toTensor();
    const int64_t R = qkv.size(0), N = qkv.size(1), D = qkv.size(2) / 3, dh = D / heads;
    const bool masked = keys.numel() > 0;
    const int64_t K = masked ? keys.size(0) : 1;
    torch::Tensor grad_qkv = torch::empty_like(qkv);
    if (!grads[0].defined()) return {grad_qkv.zero_(), torch::Tensor(), torch::Tensor()};
    const torch::Tensor grad = grads[0].contiguous();
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
    const float* in = qkv.data_ptr<float>();
    const uint8_t* key_rows = masked ? keys.data_ptr<uint8_t>() : nullptr;
    const float* prob = probabilities.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    float* out = grad_qkv.data_ptr<float>();
    each_head(in, key_rows, K, R, N, D, heads, [&](int64_t rh, const Head& head, Scratch& scratch) {
      const int64_t r = rh / heads;
      backward_head(head, scale, prob + rh * N * N, g + r * N * D, out + r * N * 3 * D, scratch);
    });
    return {grad_qkv, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

Attention self_attention(const torch::Tensor& qkv, int64_t heads, const torch::Tensor& keys) {
  if (qkv.dim() != 3 || qkv.size(2) % (3 * heads) != 0 || qkv.scalar_type() != torch::kFloat32)
    throw std::logic_error("self_attention: qkv must be float32 [R, N, 3 * heads * head dimension]");
  if (keys.defined() && (keys.dim() != 2 || keys.size(1) != qkv.size(1) || qkv.size(0) % keys.size(0) != 0))
    throw std::logic_error("self_attention: keys must be [K, N] with R a multiple of K");
  // Function::apply reads every tensor argument's device: no key mask travels as an empty tensor.
  const variable_list out = FusedAttention::apply(qkv, heads, keys.defined() ? keys : torch::empty({0}, torch::kBool));
  return {out[0], out[1]};
}

}  // namespace fednode
