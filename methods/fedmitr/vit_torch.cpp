// Part of libfednode_torch.so (core/torch_library.h). The ViT of methods/fedmitr/vit.h, run
// functionally on tensors viewed over its flat parameter vector: pre-norm blocks (LayerNorm,
// multi-head self-attention, LayerNorm, GELU MLP), a CLS token read by the head.
#include "methods/fedmitr/vit_torch.h"
#include "core/rng.h"
#include "methods/heads/eigen_tensors.h"

#include <torch/torch.h>

#include <algorithm>
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

struct Graph {
  torch::Tensor logits;         // [B, classes]
  torch::Tensor token_logits;   // [B, tokens, classes]
  torch::Tensor cls_attention;  // [B, tokens]
};

// The ViT on `images` [B, pixels] with the parameters `flat` (views, so gradients reach it when it
// requires them); `keep` undefined or [B, tokens] bool.
Graph run(const VitSpec& s, const torch::Tensor& flat, const torch::Tensor& images, const torch::Tensor& keep) {
  const int64_t B = images.size(0), T = s.tokens(), D = s.dim, H = s.heads, dh = D / H, p = s.patch, g = s.grid();
  Cursor c(flat);
  const torch::Tensor pe_W = c.take({D, s.channels * p * p}), pe_b = c.take({D});
  const torch::Tensor cls = c.take({1, 1, D}), pos = c.take({1, T + 1, D});

  // Patches flattened channel-major, then row, then column: [B, T, C*p*p].
  const torch::Tensor x = images.view({B, s.channels, g, p, g, p});
  const torch::Tensor patches = x.permute({0, 2, 4, 1, 3, 5}).reshape({B, T, s.channels * p * p});
  torch::Tensor h = torch::cat({cls.expand({B, 1, D}), linear(patches, pe_W, pe_b)}, 1) + pos;

  // A dropped patch is no key: -inf before the softmax (CLS always kept).
  torch::Tensor bias;
  if (keep.defined()) {
    const torch::Tensor keys = torch::cat({torch::ones({B, 1}, torch::kBool), keep}, 1);
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
  return {scores.select(1, 0), scores.narrow(1, 1, T), last_attention.select(2, 0).narrow(2, 1, T).mean(1)};
}

torch::Tensor flat_view(const VitModel& model) {
  return torch::from_blob(const_cast<float*>(model.parameters.data()),
                          {static_cast<int64_t>(model.parameters.size())}, torch::kFloat32);
}

void forward(const VitModel& model, const MatrixF& images, const std::vector<uint8_t>& keep, VitOutput* out) {
  torch::NoGradGuard no_grad;
  const VitSpec& s = model.spec;
  const int64_t B = images.rows(), T = s.tokens();
  torch::Tensor kept;
  if (!keep.empty())
    kept = torch::from_blob(const_cast<uint8_t*>(keep.data()), {B, T}, torch::kUInt8).to(torch::kBool);
  const Graph g = run(s, flat_view(model), to_tensor(images), kept);
  out->logits = to_matrix(g.logits);
  out->token_logits = to_matrix(g.token_logits.reshape({B * T, s.classes}));
  out->cls_attention = to_matrix(g.cls_attention);
}

// Mini-batch SGD with momentum and weight decay (torch.optim.SGD's update) over the flat
// parameters, on batches drawn by fednode's seeded shuffle.
void train(const VitModel& start, const MatrixF& images, const Labels& labels, const VitTrainOptions& o, VitModel* out) {
  const VitSpec& s = start.spec;
  const int64_t n = images.rows();
  torch::Tensor flat = flat_view(start).clone().set_requires_grad(true);
  torch::optim::SGD sgd({flat}, torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  const torch::Tensor X = to_tensor(images);
  torch::Tensor y = torch::empty({n}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int64_t>(labels[static_cast<size_t>(i)]);
  Rng shuffle = Rng::stream(o.seed, Purpose::HeadShuffle, 0xF3D);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle.below(i)]);
    for (int64_t first = 0; first < n; first += o.batch_size) {
      const int64_t m = std::min<int64_t>(o.batch_size, n - first);
      const torch::Tensor index = torch::from_blob(order.data() + first, {m}, torch::kInt64);
      const Graph g = run(s, flat, X.index_select(0, index), torch::Tensor());
      const torch::Tensor loss = F::cross_entropy(g.logits, y.index_select(0, index));
      sgd.zero_grad();
      loss.backward();
      sgd.step();
    }
    if (!torch::isfinite(flat).all().item<bool>())
      throw InputError("ViT training diverged in epoch " + std::to_string(epoch + 1) + " (lower the learning rate)");
  }
  out->spec = s;
  const torch::Tensor done = flat.detach().contiguous();
  out->parameters.assign(done.data_ptr<float>(), done.data_ptr<float>() + done.numel());
}

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT void fednode_torch_vit_forward(const fednode::VitModel& model, const fednode::MatrixF& images,
                                                    const std::vector<uint8_t>& keep, fednode::VitOutput* out) {
  fednode::forward(model, images, keep, out);
}

FEDNODE_TORCH_EXPORT void fednode_torch_vit_train(const fednode::VitModel& start, const fednode::MatrixF& images,
                                                  const fednode::Labels& labels, const fednode::VitTrainOptions& options,
                                                  fednode::VitModel* out) {
  fednode::train(start, images, labels, options, out);
}
