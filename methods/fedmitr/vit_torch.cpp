// Part of libfednode_torch.so (core/torch_library.h). The ViT of methods/fedmitr/vit.h, run
// functionally on tensors viewed over its flat parameter vector: pre-norm blocks (LayerNorm,
// multi-head self-attention, LayerNorm, GELU MLP), a CLS token read by the head.
#include "methods/fedmitr/vit_torch.h"
#include "methods/fedmitr/attention_torch.h"
#include "methods/fedmitr/linear_torch.h"
#include "core/rng.h"
#include "methods/fedmitr/vit_graph_torch.h"
#include "methods/fedmitr/vit_script_torch.h"
#include "methods/heads/eigen_tensors.h"
#include "methods/heads/flat_sgd_torch.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace fednode {
namespace {

namespace F = torch::nn::functional;

// Hands out views of M models' flat parameters ([M, P], vit.h's order), as [M, shape...].
class Cursor {
 public:
  explicit Cursor(const torch::Tensor& flats) : flats_(flats) {}
  torch::Tensor take(std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    shape.insert(shape.begin(), flats_.size(0));
    torch::Tensor t = flats_.narrow(1, at_, n).view(shape);
    at_ += n;
    return t;
  }
  int64_t used() const { return at_; }

 private:
  torch::Tensor flats_;
  int64_t at_ = 0;
};

// LayerNorm over the last dimension with each model's gain g [M, D] and bias b [M, D].
torch::Tensor layer_norm(const torch::Tensor& h, const torch::Tensor& g, const torch::Tensor& b) {
  const int64_t M = g.size(0), D = g.size(1);
  if (M == 1)
    return F::layer_norm(h, F::LayerNormFuncOptions({D}).weight(g.select(0, 0)).bias(b.select(0, 0)).eps(1e-6));
  std::vector<int64_t> shape(static_cast<size_t>(h.dim()), 1);
  shape.front() = M, shape.back() = D;
  return F::layer_norm(h, F::LayerNormFuncOptions({D}).eps(1e-6)) * g.view(shape) + b.view(shape);
}

// The ViT of M models (`flats` [M, P], views, so gradients reach the parameters when they require
// them) on `images` [B, pixels]; `keep` undefined or [B, tokens] bool. Without `token_scores` the
// graph has no token_logits, and after the last attention only CLS's row goes on: the class scores
// read it alone, and the CLS attention is the attention's own.
Graph run(const VitSpec& s, const torch::Tensor& flats, const torch::Tensor& images, const torch::Tensor& keep,
          Stopped stopped = Stopped::Masked, bool token_scores = true) {
  if (s.scripted()) return run_script(s, flats, images, keep, stopped);
  const int64_t M = flats.size(0), B = images.size(0), T = s.tokens(), D = s.dim, H = s.heads,
                p = s.patch, g = s.grid();
  Cursor c(flats);
  const torch::Tensor pe_W = c.take({D, s.channels * p * p}), pe_b = c.take({D});
  const torch::Tensor cls = c.take({1, D}), pos = c.take({T + 1, D});

  // Patches flattened channel-major, then row, then column: [B, T, C*p*p].
  const torch::Tensor x = images.view({B, s.channels, g, p, g, p});
  const torch::Tensor patches = x.permute({0, 2, 4, 1, 3, 5}).reshape({B, T, s.channels * p * p});
  torch::Tensor tokens = models_linear(patches.unsqueeze(0).expand({M, B, T, s.channels * p * p}), pe_W, pe_b) +
                         pos.narrow(1, 1, T).unsqueeze(1);  // [M, B, T, D]
  torch::Tensor kept_index;  // [B, k] when stopped patches are dropped
  torch::Tensor keys;        // [B, N] when they are masked: whether each token is a key
  if (keep.defined() && stopped == Stopped::Dropped) {
    const torch::Tensor counts = keep.sum(1);
    const int64_t k = counts.min().item<int64_t>();
    if (k != counts.max().item<int64_t>()) throw std::logic_error("ViT: dropping patches needs equal counts");
    if (k < T) {
      kept_index = keep.nonzero().select(1, 1).view({B, k});  // row-major: image by image, in order
      tokens = tokens.gather(2, kept_index.view({1, B, k, 1}).expand({M, B, k, D}));
    }
  } else if (keep.defined()) {
    keys = torch::cat({torch::ones({B, 1}, torch::kBool), keep}, 1);
  }
  const torch::Tensor cls_token = (cls + pos.narrow(1, 0, 1)).unsqueeze(1).expand({M, B, 1, D});
  torch::Tensor h = torch::cat({cls_token, tokens}, 2);  // [M, B, N, D]
  const int64_t N = h.size(2);

  torch::Tensor last_attention;
  for (int block = 0; block < s.depth; ++block) {
    const torch::Tensor ln1_g = c.take({D}), ln1_b = c.take({D});
    const torch::Tensor qkv_W = c.take({3 * D, D}), qkv_b = c.take({3 * D});
    const torch::Tensor proj_W = c.take({D, D}), proj_b = c.take({D});
    const torch::Tensor ln2_g = c.take({D}), ln2_b = c.take({D});
    const torch::Tensor fc1_W = c.take({s.mlp_dim, D}), fc1_b = c.take({s.mlp_dim});
    const torch::Tensor fc2_W = c.take({D, s.mlp_dim}), fc2_b = c.take({D});

    const torch::Tensor y = layer_norm(h, ln1_g, ln1_b);
    const Attention attention = self_attention(models_linear(y, qkv_W, qkv_b).view({M * B, N, 3 * D}), H, keys);
    torch::Tensor mixed = attention.mixed.view({M, B, N, D});
    if (!token_scores && block == s.depth - 1) {
      h = h.narrow(2, 0, 1);
      mixed = mixed.narrow(2, 0, 1);
    }
    h = h + models_linear(mixed, proj_W, proj_b);
    const torch::Tensor z = layer_norm(h, ln2_g, ln2_b);
    h = h + models_linear(torch::gelu(models_linear(z, fc1_W, fc1_b)), fc2_W, fc2_b);
    last_attention = attention.probabilities;  // [M*B, H, N, N]
  }
  const torch::Tensor lnf_g = c.take({D}), lnf_b = c.take({D});
  const torch::Tensor head_W = c.take({s.classes, D}), head_b = c.take({s.classes});
  if (c.used() != flats.size(1)) throw std::logic_error("ViT: the parameter layout does not add up");
  h = layer_norm(h, lnf_g, lnf_b);
  const torch::Tensor scores = models_linear(h, head_W, head_b);  // [M, B, N or 1, classes]
  const torch::Tensor from_cls = last_attention.select(2, 0).narrow(2, 1, N - 1).mean(1).view({M, B, N - 1});
  Graph out;
  out.logits = scores.select(2, 0);
  if (kept_index.defined()) {
    out.cls_attention = torch::zeros({M, B, T}).scatter(2, kept_index.unsqueeze(0).expand({M, B, N - 1}), from_cls);
  } else {
    if (token_scores) out.token_logits = scores.narrow(2, 1, T);
    out.cls_attention = from_cls;
  }
  return out;
}

// One model's parameters as [1, P], without a copy.
torch::Tensor flat_view(const VitModel& model) {
  return torch::from_blob(const_cast<float*>(model.parameters.data()),
                          {1, static_cast<int64_t>(model.parameters.size())}, torch::kFloat32);
}

// The graph of a one-model run, without the models' dimension.
Graph single(const Graph& g) {
  Graph out;
  out.logits = g.logits.select(0, 0);
  if (g.token_logits.defined()) out.token_logits = g.token_logits.select(0, 0);
  out.cls_attention = g.cls_attention.select(0, 0);
  return out;
}

void forward(const VitModel& model, const MatrixF& images, const std::vector<uint8_t>& keep, bool drop_stopped,
             bool token_logits, VitOutput* out) {
  torch::NoGradGuard no_grad;
  const VitSpec& s = model.spec;
  const int64_t B = images.rows(), T = s.tokens();
  torch::Tensor kept;
  if (!keep.empty())
    kept = torch::from_blob(const_cast<uint8_t*>(keep.data()), {B, T}, torch::kUInt8).to(torch::kBool);
  const Graph g = single(
      run(s, flat_view(model), to_tensor(images), kept, drop_stopped ? Stopped::Dropped : Stopped::Masked, token_logits));
  out->logits = to_matrix(g.logits);
  out->token_logits = g.token_logits.defined() ? to_matrix(g.token_logits.reshape({B * T, s.classes}))
                                               : MatrixF(0, s.classes);
  out->cls_attention = to_matrix(g.cls_attention);
}

// SGD (methods/heads/flat_sgd_torch.h) over a ViT's flat parameters.
void sgd_epochs(const VitModel& start, int64_t n, int epochs, int batch_size, double lr, double momentum,
                double weight_decay, Rng shuffle, const char* what,
                const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& batch_loss, VitModel* out) {
  const torch::Tensor done =
      flat_sgd(flat_view(start), n, epochs, batch_size, lr, momentum, weight_decay, shuffle, what, batch_loss);
  out->spec = start.spec;
  out->parameters.assign(done.data_ptr<float>(), done.data_ptr<float>() + done.numel());
}

void train(const VitModel& start, const MatrixF& images, const Labels& labels, const VitTrainOptions& o, VitModel* out) {
  const int64_t n = images.rows();
  const torch::Tensor X = to_tensor(images);
  torch::Tensor y = torch::empty({n}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int64_t>(labels[static_cast<size_t>(i)]);
  sgd_epochs(start, n, o.epochs_for(n), o.batch_size, o.lr, o.momentum, o.weight_decay, Rng::stream(o.seed, Purpose::HeadShuffle, 0xF3D),
             "ViT training",
             [&](const torch::Tensor& flat, const torch::Tensor& index) {
               const Graph g = run(start.spec, flat, X.index_select(0, index), torch::Tensor(), Stopped::Masked, false);
               return F::cross_entropy(g.logits.select(0, 0), y.index_select(0, index));
             },
             out);
}

// Jensen-Shannon divergence between the rows' softmax distributions, averaged over rows.
torch::Tensor js_divergence(const torch::Tensor& a_logits, const torch::Tensor& b_logits) {
  const torch::Tensor p = torch::softmax(a_logits, -1), q = torch::softmax(b_logits, -1);
  const torch::Tensor m_log = (0.5 * (p + q)).clamp_min(1e-12).log();
  const torch::Tensor kl_pm = (p * (p.clamp_min(1e-12).log() - m_log)).sum(-1);
  const torch::Tensor kl_qm = (q * (q.clamp_min(1e-12).log() - m_log)).sum(-1);
  return (0.5 * (kl_pm + kl_qm)).mean();
}

// Squared differences of neighbouring pixels, per image, averaged.
torch::Tensor total_variation(const torch::Tensor& x, const VitSpec& s) {
  const torch::Tensor img = x.view({x.size(0), s.channels, s.image_size, s.image_size});
  const torch::Tensor dh = img.narrow(3, 1, s.image_size - 1) - img.narrow(3, 0, s.image_size - 1);
  const torch::Tensor dv = img.narrow(2, 1, s.image_size - 1) - img.narrow(2, 0, s.image_size - 1);
  return dh.pow(2).mean() + dv.pow(2).mean();
}

void invert(const std::vector<VitModel>& ensemble, const VitModel* student, const Labels& targets,
            const InversionOptions& o, const std::vector<double>& shares, bool probabilities, const MatrixF& noise,
            Inversion* out) {
  const VitSpec& s = ensemble[0].spec;
  const int64_t B = noise.rows(), T = s.tokens(), p = s.patch, g = s.grid();
  // The ensemble and the student (the last row, when it takes part) run as one stacked graph.
  const bool with_student = student != nullptr && o.js_weight > 0;
  const int64_t M = static_cast<int64_t>(ensemble.size());
  std::vector<torch::Tensor> rows;
  for (const VitModel& m : ensemble) rows.push_back(flat_view(m));
  if (with_student) rows.push_back(flat_view(*student));
  const torch::Tensor flats = torch::cat(rows, 0);
  torch::Tensor y = torch::empty({B}, torch::kInt64);
  for (int64_t i = 0; i < B; ++i) y[i] = static_cast<int64_t>(targets[static_cast<size_t>(i)]);
  torch::Tensor w = torch::empty({M, 1, 1});
  for (int64_t k = 0; k < M; ++k) w[k] = shares[static_cast<size_t>(k)];
  // The ensemble's class scores from its models' [M, B, classes]: with probabilities, log of their
  // mixture (what cross-entropy and the JS term read as logits).
  const auto mixed = [&](const torch::Tensor& per_model) {
    return probabilities ? torch::logsumexp(torch::log_softmax(per_model, -1) + w.log(), 0) : (w * per_model).sum(0);
  };
  torch::Tensor x = to_tensor(noise).set_requires_grad(true);
  torch::optim::Adam adam({x}, torch::optim::AdamOptions(o.lr));
  torch::Tensor keep = torch::ones({B, T}, torch::kBool);
  torch::Tensor frozen;  // the pixels of stopped patches, as they were when they stopped
  torch::Tensor attention;
  auto pixel_keep = [&] {  // [B, pixels]: whether each pixel's patch is still inverted
    return keep.view({B, 1, g, 1, g, 1}).expand({B, s.channels, g, p, g, p}).reshape({B, s.pixels()});
  };
  for (int it = 0; it < o.iterations; ++it) {
    if (std::find(o.mask_at.begin(), o.mask_at.end(), it) != o.mask_at.end() && attention.defined()) {
      // Stop the lowest-attention mask_ratio of each image's remaining patches.
      torch::NoGradGuard no_grad;
      const torch::Tensor scores = attention.masked_fill(keep.logical_not(), std::numeric_limits<float>::infinity());
      const torch::Tensor order = std::get<1>(scores.sort(/*dim=*/1, /*descending=*/false));
      const auto kept = keep.sum(1);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t k = kept[b].item<int64_t>();
        const int64_t stop = std::min<int64_t>(static_cast<int64_t>(o.mask_ratio * static_cast<double>(k)), k - 1);
        for (int64_t j = 0; j < stop; ++j) keep[b][order[b][j].item<int64_t>()] = false;
      }
      frozen = x.detach().clone();
    }
    // Every image keeps as many patches as the others, so the stopped ones leave the sequence.
    const Graph gr = run(s, flats, x, keep, Stopped::Dropped, /*token_scores=*/false);
    const torch::Tensor logits = mixed(gr.logits.narrow(0, 0, M));
    attention = (w * gr.cls_attention.narrow(0, 0, M).detach()).sum(0);
    const torch::Tensor ce = F::cross_entropy(logits, y);
    torch::Tensor loss = ce + o.tv_weight * total_variation(x, s);
    if (o.l2_weight > 0) loss = loss + o.l2_weight * x.pow(2).sum(1).mean();
    if (with_student) loss = loss - o.js_weight * js_divergence(gr.logits.select(0, M), logits);
    if (it == 0) out->first_loss = ce.item<double>();
    out->last_loss = ce.item<double>();
    adam.zero_grad();
    loss.backward();
    adam.step();
    if (frozen.defined()) {  // Adam's momentum would move them on
      torch::NoGradGuard no_grad;
      x.copy_(torch::where(pixel_keep(), x, frozen));
    }
  }
  out->images = to_matrix(x);
  const torch::Tensor k = keep.to(torch::kUInt8).contiguous();
  out->keep.assign(k.data_ptr<uint8_t>(), k.data_ptr<uint8_t>() + k.numel());
  out->cls_attention = attention.defined() ? to_matrix(attention) : MatrixF::Zero(B, T);
}

// The distillation loss of vit.h on a batch: `teacher` [B, classes], `pseudo` [B], `high` [B, tokens].
torch::Tensor distill_loss(const Graph& g, const torch::Tensor& teacher, const torch::Tensor& pseudo,
                           const torch::Tensor& high, const DistillOptions& o) {
  if (o.loss == DistillLoss::PseudoLabel) return F::cross_entropy(g.logits, pseudo);
  const double T = o.temperature;
  const torch::Tensor soft = torch::softmax(teacher / T, -1);
  const torch::Tensor kd = F::kl_div(torch::log_softmax(g.logits / T, -1), soft,
                                     F::KLDivFuncOptions().reduction(torch::kBatchMean)) * (T * T);
  if (o.loss == DistillLoss::Kd || o.token_weight == 0) return kd;
  // Every token of image b against image b's targets: [B, tokens].
  const int64_t B = g.token_logits.size(0), tokens = g.token_logits.size(1);
  const torch::Tensor log_p = torch::log_softmax(g.token_logits, -1);  // [B, tokens, classes]
  const torch::Tensor ce = -log_p.gather(2, pseudo.view({B, 1, 1}).expand({B, tokens, 1})).squeeze(2);
  const torch::Tensor p_teacher = torch::softmax(teacher, -1).unsqueeze(1);  // [B, 1, classes]
  const torch::Tensor kl = (p_teacher * (p_teacher.clamp_min(1e-12).log() - log_p)).sum(-1);
  const torch::Tensor hi = high.to(torch::kFloat32), lo = 1.0 - hi;
  const torch::Tensor token_loss = o.high_weight * (ce * hi).sum() / hi.sum().clamp_min(1.0) +
                                   o.low_weight * (kl * lo).sum() / lo.sum().clamp_min(1.0);
  return kd + o.token_weight * token_loss;
}

// Whether distill_loss reads the student's per-token scores (token relabelling does).
bool reads_tokens(const DistillOptions& o) { return o.loss == DistillLoss::TokenRelabel && o.token_weight != 0; }

struct DistillTensors {
  torch::Tensor X, teacher, pseudo, high;
};

DistillTensors distill_tensors(const VitSpec& s, const MatrixF& images, const DistillTargets& t) {
  const int64_t B = images.rows();
  DistillTensors d;
  d.X = to_tensor(images);
  d.teacher = to_tensor(t.teacher_logits);
  d.pseudo = torch::empty({B}, torch::kInt64);
  for (int64_t i = 0; i < B; ++i) d.pseudo[i] = static_cast<int64_t>(t.pseudo[static_cast<size_t>(i)]);
  d.high = torch::from_blob(const_cast<uint8_t*>(t.high.data()), {B, s.tokens()}, torch::kUInt8).to(torch::kBool);
  return d;
}

void distill(const VitModel& student, const MatrixF& images, const DistillTargets& t, const DistillOptions& o, VitModel* out) {
  const DistillTensors d = distill_tensors(student.spec, images, t);
  sgd_epochs(student, images.rows(), o.epochs, o.batch_size, o.lr, o.momentum, o.weight_decay,
             Rng::stream(o.seed, Purpose::HeadShuffle, 0xD157), "ViT distillation",
             [&](const torch::Tensor& flat, const torch::Tensor& index) {
               const Graph g = single(
                   run(student.spec, flat, d.X.index_select(0, index), torch::Tensor(), Stopped::Masked, reads_tokens(o)));
               return distill_loss(g, d.teacher.index_select(0, index), d.pseudo.index_select(0, index),
                                   d.high.index_select(0, index), o);
             },
             out);
}

void distillation_loss(const VitModel& student, const MatrixF& images, const DistillTargets& t, const DistillOptions& o,
                       double* out) {
  torch::NoGradGuard no_grad;
  const DistillTensors d = distill_tensors(student.spec, images, t);
  const Graph g = single(run(student.spec, flat_view(student), d.X, torch::Tensor(), Stopped::Masked, reads_tokens(o)));
  *out = distill_loss(g, d.teacher, d.pseudo, d.high, o).item<double>();
}

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT void fednode_torch_vit_load_script(const std::string& path, const std::string& digest,
                                                        fednode::VitSpec* spec) {
  fednode::load_script(path, digest, spec);
}

FEDNODE_TORCH_EXPORT void fednode_torch_vit_script_start(const std::string& digest, std::vector<float>* out) {
  fednode::script_start(digest, out);
}

FEDNODE_TORCH_EXPORT void fednode_torch_vit_forward(const fednode::VitModel& model, const fednode::MatrixF& images,
                                                    const std::vector<uint8_t>& keep, bool drop_stopped,
                                                    bool token_logits, fednode::VitOutput* out) {
  fednode::forward(model, images, keep, drop_stopped, token_logits, out);
}

FEDNODE_TORCH_EXPORT void fednode_torch_vit_train(const fednode::VitModel& start, const fednode::MatrixF& images,
                                                  const fednode::Labels& labels, const fednode::VitTrainOptions& options,
                                                  fednode::VitModel* out) {
  fednode::train(start, images, labels, options, out);
}

FEDNODE_TORCH_EXPORT void fednode_torch_vit_invert(const std::vector<fednode::VitModel>& ensemble,
                                                   const fednode::VitModel* student, const fednode::Labels& targets,
                                                   const fednode::InversionOptions& options,
                                                   const std::vector<double>& shares, bool probabilities,
                                                   const fednode::MatrixF& noise, fednode::Inversion* out) {
  fednode::invert(ensemble, student, targets, options, shares, probabilities, noise, out);
}

FEDNODE_TORCH_EXPORT void fednode_torch_vit_distill(const fednode::VitModel& student, const fednode::MatrixF& images,
                                                    const fednode::DistillTargets& targets,
                                                    const fednode::DistillOptions& options, fednode::VitModel* out) {
  fednode::distill(student, images, targets, options, out);
}

FEDNODE_TORCH_EXPORT void fednode_torch_vit_distill_loss(const fednode::VitModel& student, const fednode::MatrixF& images,
                                                         const fednode::DistillTargets& targets,
                                                         const fednode::DistillOptions& options, double* out) {
  fednode::distillation_loss(student, images, targets, options, out);
}
