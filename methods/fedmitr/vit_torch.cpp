// Part of libfednode_torch.so (core/torch_library.h). The ViT of methods/fedmitr/vit.h, run
// functionally on tensors viewed over its flat parameter vector: pre-norm blocks (LayerNorm,
// multi-head self-attention, LayerNorm, GELU MLP), a CLS token read by the head.
#include "methods/fedmitr/vit_torch.h"
#include "methods/heads/eigen_tensors.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace fednode {
namespace {

namespace F = torch::nn::functional;

// Hands out views of the flat parameters in vit.h's order.
class Cursor {
 public:
  explicit Cursor(const torch::Tensor& flat) : flat_(flat) {}
  torch::Tensor take(std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    torch::Tensor t = flat_.narrow(0, at_, n).view(shape);
    at_ += n;
    return t;
  }
  int64_t used() const { return at_; }

 private:
  torch::Tensor flat_;
  int64_t at_ = 0;
};

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& W, const torch::Tensor& b) {
  return torch::matmul(x, W.t()) + b;
}

void forward(const VitModel& model, const MatrixF& images, const std::vector<uint8_t>& keep, VitOutput* out) {
  torch::NoGradGuard no_grad;
  const VitSpec& s = model.spec;
  const int64_t B = images.rows(), T = s.tokens(), D = s.dim, H = s.heads, dh = D / H, p = s.patch, g = s.grid();
  const torch::Tensor flat =
      torch::from_blob(const_cast<float*>(model.parameters.data()), {static_cast<int64_t>(model.parameters.size())},
                       torch::kFloat32);
  Cursor c(flat);
  const torch::Tensor pe_W = c.take({D, s.channels * p * p}), pe_b = c.take({D});
  const torch::Tensor cls = c.take({1, 1, D}), pos = c.take({1, T + 1, D});

  // Patches flattened channel-major, then row, then column: [B, T, C*p*p].
  const torch::Tensor x = to_tensor(images).view({B, s.channels, g, p, g, p});
  const torch::Tensor patches = x.permute({0, 2, 4, 1, 3, 5}).reshape({B, T, s.channels * p * p});
  torch::Tensor h = torch::cat({cls.expand({B, 1, D}), linear(patches, pe_W, pe_b)}, 1) + pos;

  // A dropped patch is no key: -inf before the softmax (CLS always kept).
  torch::Tensor bias;
  if (!keep.empty()) {
    const torch::Tensor kept =
        torch::from_blob(const_cast<uint8_t*>(keep.data()), {B, T}, torch::kUInt8).to(torch::kBool);
    const torch::Tensor keys = torch::cat({torch::ones({B, 1}, torch::kBool), kept}, 1);
    bias = torch::zeros({B, 1, 1, T + 1}).masked_fill(keys.logical_not().view({B, 1, 1, T + 1}),
                                                      -std::numeric_limits<float>::infinity());
  }
  torch::Tensor last_attention;
  for (int block = 0; block < s.depth; ++block) {
    const torch::Tensor ln1_g = c.take({D}), ln1_b = c.take({D});
    const torch::Tensor qkv_W = c.take({3 * D, D}), qkv_b = c.take({3 * D});
    const torch::Tensor proj_W = c.take({D, D}), proj_b = c.take({D});
    const torch::Tensor ln2_g = c.take({D}), ln2_b = c.take({D});
    const torch::Tensor fc1_W = c.take({s.mlp_dim, D}), fc1_b = c.take({s.mlp_dim});
    const torch::Tensor fc2_W = c.take({D, s.mlp_dim}), fc2_b = c.take({D});

    const torch::Tensor y = F::layer_norm(h, F::LayerNormFuncOptions({D}).weight(ln1_g).bias(ln1_b).eps(1e-6));
    const torch::Tensor qkv = linear(y, qkv_W, qkv_b).view({B, T + 1, 3, H, dh}).permute({2, 0, 3, 1, 4});
    torch::Tensor scores = torch::matmul(qkv[0], qkv[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(dh));
    if (bias.defined()) scores = scores + bias;
    const torch::Tensor attention = torch::softmax(scores, -1);  // [B, H, T+1, T+1]
    const torch::Tensor mixed = torch::matmul(attention, qkv[2]).transpose(1, 2).reshape({B, T + 1, D});
    h = h + linear(mixed, proj_W, proj_b);
    const torch::Tensor z = F::layer_norm(h, F::LayerNormFuncOptions({D}).weight(ln2_g).bias(ln2_b).eps(1e-6));
    h = h + linear(torch::gelu(linear(z, fc1_W, fc1_b)), fc2_W, fc2_b);
    last_attention = attention;
  }
  const torch::Tensor lnf_g = c.take({D}), lnf_b = c.take({D});
  const torch::Tensor head_W = c.take({s.classes, D}), head_b = c.take({s.classes});
  if (c.used() != flat.size(0)) throw std::logic_error("ViT: the parameter layout does not add up");
  h = F::layer_norm(h, F::LayerNormFuncOptions({D}).weight(lnf_g).bias(lnf_b).eps(1e-6));
  const torch::Tensor scores = linear(h, head_W, head_b);  // [B, T+1, classes]
  out->logits = to_matrix(scores.select(1, 0));
  out->token_logits = to_matrix(scores.narrow(1, 1, T).reshape({B * T, s.classes}));
  out->cls_attention = to_matrix(last_attention.select(2, 0).narrow(2, 1, T).mean(1));
}

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT void fednode_torch_vit_forward(const fednode::VitModel& model, const fednode::MatrixF& images,
                                                    const std::vector<uint8_t>& keep, fednode::VitOutput* out) {
  fednode::forward(model, images, keep, out);
}
