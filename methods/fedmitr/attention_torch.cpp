// Part of libfednode_torch.so (core/torch_library.h): the ViT's self-attention, fused
// (attention_torch.h). The loops keep their innermost index contiguous and their sums in separate
// accumulators, so that the compiler vectorises them without reordering any sum.
#include "methods/fedmitr/attention_torch.h"

#include <ATen/Parallel.h>

#include <cmath>
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

// `to` [dh, N] = the head's keys or values (`which` 1 or 2), transposed: a query's N scores are
// then sums over d of one contiguous row each, which vectorise over the keys.
void transpose_head(const Head& h, int which, float* to) {
  for (int64_t j = 0; j < h.N; ++j) {
    const float* from = h.q(j) + which * h.D;
    for (int64_t d = 0; d < h.dh; ++d) to[d * h.N + j] = from[d];
  }
}

// row[j] = sum_d a[d] * t[d, j] for the N columns of `t` [dh, N].
void scores_row(const float* a, const float* t, int64_t dh, int64_t N, float* row) {
  for (int64_t j = 0; j < N; ++j) row[j] = 0.0f;
  for (int64_t d = 0; d < dh; ++d) {
    const float ad = a[d];
    const float* td = t + d * N;
    for (int64_t j = 0; j < N; ++j) row[j] += ad * td[j];
  }
}

// Built twice, for AVX2 with FMA and for the baseline x86-64, the loader picking one per machine
// (target_clones): built for the baseline alone, the two took 30 % of a receiver's time.
#define FEDNODE_ATTENTION_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))

FEDNODE_ATTENTION_CLONES void forward_head(const Head& h, float scale, float* probabilities /* [N, N] */,
                                           float* mixed /* [N, D] */, float* kt /* [dh, N] */) {
  const int64_t N = h.N, dh = h.dh;
  transpose_head(h, 1, kt);
  for (int64_t i = 0; i < N; ++i) {
    float* p = probabilities + i * N;
    scores_row(h.q(i), kt, dh, N, p);
    float top = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < N; ++j) {
      p[j] = h.key(j) ? p[j] * scale : -std::numeric_limits<float>::infinity();
      top = std::max(top, p[j]);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < N; ++j) {
      p[j] = h.key(j) ? std::exp(p[j] - top) : 0.0f;
      sum += p[j];
    }
    const float inverse = 1.0f / sum;
    for (int64_t j = 0; j < N; ++j) p[j] *= inverse;
    float* out = mixed + i * h.D + h.offset;
    for (int64_t d = 0; d < dh; ++d) out[d] = 0.0f;
    for (int64_t j = 0; j < N; ++j) {
      const float pj = p[j];
      const float* vj = h.v(j);
      for (int64_t d = 0; d < dh; ++d) out[d] += pj * vj[d];
    }
  }
}

// The gradient of one head: `grad` [N, D] of its mixed output in, [N, 3 * D] of its q, k and v out
// (each head writes its own columns only).
FEDNODE_ATTENTION_CLONES void backward_head(const Head& h, float scale, const float* probabilities, const float* grad,
                                            float* grad_qkv, float* vt /* [dh, N] */, float* ds /* [N] */) {
  const int64_t N = h.N, D = h.D, dh = h.dh;
  transpose_head(h, 2, vt);
  float* gq_base = grad_qkv + h.offset;
  float* gk_base = grad_qkv + D + h.offset;
  float* gv_base = grad_qkv + 2 * D + h.offset;
  for (int64_t t = 0; t < N; ++t)
    for (int64_t d = 0; d < dh; ++d) gq_base[t * 3 * D + d] = gk_base[t * 3 * D + d] = gv_base[t * 3 * D + d] = 0.0f;
  for (int64_t i = 0; i < N; ++i) {
    const float* p = probabilities + i * N;
    const float* g = grad + i * D + h.offset;
    // dV_j += p_ij g_i; dP_ij = g_i . v_j; dS_ij = p_ij (dP_ij - sum_j' p_ij' dP_ij').
    for (int64_t j = 0; j < N; ++j) {
      const float pj = p[j];
      float* gv = gv_base + j * 3 * D;
      for (int64_t d = 0; d < dh; ++d) gv[d] += pj * g[d];
    }
    scores_row(g, vt, dh, N, ds);
    float expected = 0.0f;
    for (int64_t j = 0; j < N; ++j) expected += p[j] * ds[j];
    for (int64_t j = 0; j < N; ++j) ds[j] = p[j] * (ds[j] - expected) * scale;
    // dQ_i = sum_j dS_ij k_j; dK_j += dS_ij q_i.
    float* gq = gq_base + i * 3 * D;
    const float* q = h.q(i);
    for (int64_t j = 0; j < N; ++j) {
      const float s = ds[j];
      if (s == 0.0f) continue;  // a token that is no key, or a query that ignores it
      const float* k = h.k(j);
      float* gk = gk_base + j * 3 * D;
      for (int64_t d = 0; d < dh; ++d) {
        gq[d] += s * k[d];
        gk[d] += s * q[d];
      }
    }
  }
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
    at::parallel_for(0, R * heads, 32, [&](int64_t begin, int64_t end) {
      std::vector<float> kt(static_cast<size_t>(dh * N));
      for (int64_t rh = begin; rh < end; ++rh) {
        const int64_t r = rh / heads, h = rh % heads;
        const Head head{in + r * N * 3 * D, key_rows ? key_rows + (r % K) * N : nullptr, N, D, dh, h * dh};
        forward_head(head, scale, prob + rh * N * N, out + r * N * D, kt.data());
      }
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
    at::parallel_for(0, R * heads, 32, [&](int64_t begin, int64_t end) {
      std::vector<float> vt(static_cast<size_t>(dh * N)), ds(static_cast<size_t>(N));
      for (int64_t rh = begin; rh < end; ++rh) {
        const int64_t r = rh / heads, h = rh % heads;
        const Head head{in + r * N * 3 * D, key_rows ? key_rows + (r % K) * N : nullptr, N, D, dh, h * dh};
        backward_head(head, scale, prob + rh * N * N, g + r * N * D, out + r * N * 3 * D, vt.data(), ds.data());
      }
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
