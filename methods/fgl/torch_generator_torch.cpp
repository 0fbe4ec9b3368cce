// Part of libfednode_torch.so (core/torch_library.h). The DCGAN of torch_generator.h: the
// generator, its text encoder included, is written in TorchScript and compiled here
// (Module::define), so the module fednode trains is the very file it saves; the discriminator
// only exists while training.
#include "methods/fgl/torch_generator_torch.h"

#include "core/rng.h"
#include "methods/heads/eigen_tensors.h"

#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace fednode {
namespace {

constexpr int kEmbedding = 32;  // the label's or the text's learnt embedding, concatenated to z
constexpr int kWordBuckets = 4096;  // a text generator's hashed words

// How a generator turns what it is asked for into the embedding beside z. A label generator
// looks its label up. A text generator encodes a text as the mean of its words' embeddings, a
// word (a run of letters and digits, lower-cased; other bytes from 128 up count as letters) being
// hashed (32-bit FNV-1a) into one of kWordBuckets rows: no vocabulary to ship, and any text
// encodes. It has no use for the negative prompt, which a diffusion model would use for guidance.
std::string conditioning_source(Conditioning kind) {
  if (kind == Conditioning::Label) return R"(
def forward(self, z: Tensor, labels: Tensor) -> Tensor:
    return self.draw(z, torch.embedding(self.embed, labels), False)
)";
  return R"(
def forward(self, z: Tensor, text_embedding: Tensor) -> Tensor:
    return self.draw(z, text_embedding, False)

def encode(self, texts: List[str], negative_texts: List[str]) -> Tensor:
    rows: List[Tensor] = []
    for text in texts:
        rows.append(torch.embedding(self.words, torch.tensor(self.words_of(text))).mean(0))
    return torch.stack(rows)

def words_of(self, text: str) -> List[int]:
    ids: List[int] = []
    h = 2166136261
    n = 0
    for c in text.lower() + " ":
        o = ord(c)
        if (o >= 48 and o <= 57) or (o >= 97 and o <= 122) or o >= 128:
            h = ((h ^ o) * 16777619) % 4294967296
            n += 1
        elif n > 0:
            ids.append(h % )" + std::to_string(kWordBuckets) + R"()
            h = 2166136261
            n = 0
    if len(ids) == 0:
        ids.append(0)
    return ids
)";
}

// The generator's source: z and the condition's embedding through a linear layer to 2W planes of
// size/4, then two stride-2 transposed convolutions with batch norm and ReLU, and a sigmoid.
std::string generator_source(Conditioning kind, int width, int quarter) {
  const std::string planes = std::to_string(2 * width), q = std::to_string(quarter);
  return conditioning_source(kind) + R"(
def draw(self, z: Tensor, condition: Tensor, training: bool) -> Tensor:
    h = torch.cat([z, condition], 1)
    h = torch.addmm(self.fc_b, h, self.fc_w.t()).view(-1, )" + planes + ", " + q + ", " + q + R"()
    h = torch.relu(torch.batch_norm(h, self.bn0_w, self.bn0_b, self.bn0_mean, self.bn0_var, training, 0.1, 1e-5, False))
    h = torch.conv_transpose2d(h, self.up1_w, self.up1_b, [2, 2], [1, 1])
    h = torch.relu(torch.batch_norm(h, self.bn1_w, self.bn1_b, self.bn1_mean, self.bn1_var, training, 0.1, 1e-5, False))
    h = torch.conv_transpose2d(h, self.up2_w, self.up2_b, [2, 2], [1, 1])
    return torch.sigmoid(h)
)";
}

// The DCGAN initialisation: weights N(0, 0.02), batch-norm gains N(1, 0.02), biases 0.
torch::Tensor normal(std::vector<int64_t> shape, double mean, double sd) {
  return (torch::randn(shape) * sd + mean).set_requires_grad(true);
}
torch::Tensor zeros(std::vector<int64_t> shape, bool trainable) {
  return torch::zeros(shape).set_requires_grad(trainable);
}

// While alive, TorchScript graphs run on this thread op by op, as written, with autograd as in
// eager PyTorch, rather than through the graph executor's profiled and optimised training graph:
// that made the generator's training 3-8 % slower than the same DCGAN in eager PyTorch
// (bench/bench_fgl, 2 threads: 571 against 591 images/s; as written 607 against 580). LibTorch
// keeps the setting per thread; the previous one is restored.
class GraphAsWritten {
 public:
  GraphAsWritten() : previous_(torch::jit::getGraphExecutorOptimize()) { torch::jit::setGraphExecutorOptimize(false); }
  ~GraphAsWritten() { torch::jit::setGraphExecutorOptimize(previous_); }
  GraphAsWritten(const GraphAsWritten&) = delete;
  GraphAsWritten& operator=(const GraphAsWritten&) = delete;

 private:
  bool previous_;
};

struct Discriminator : torch::nn::Module {
  Discriminator(int in_planes, int width, int quarter)
      : c1(register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in_planes, width, 4).stride(2).padding(1)))),
        c2(register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(width, 2 * width, 4).stride(2).padding(1)))),
        bn(register_module("bn", torch::nn::BatchNorm2d(2 * width))),
        out(register_module("out", torch::nn::Linear(2 * width * quarter * quarter, 1))) {
    torch::NoGradGuard no_grad;
    for (auto* c : {&c1, &c2}) {
      (*c)->weight.normal_(0, 0.02);
      (*c)->bias.zero_();
    }
    bn->weight.normal_(1, 0.02);
    bn->bias.zero_();
  }
  // The label enters as one plane per class, 1 on its own class's plane.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& onehot) {
    const torch::Tensor planes = onehot.view({onehot.size(0), onehot.size(1), 1, 1}).expand(
        {onehot.size(0), onehot.size(1), x.size(2), x.size(3)});
    torch::Tensor h = torch::leaky_relu(c1(torch::cat({x, planes}, 1)), 0.2);
    h = torch::leaky_relu(bn(c2(h)), 0.2);
    return out(h.flatten(1)).squeeze(1);
  }
  torch::nn::Conv2d c1, c2;
  torch::nn::BatchNorm2d bn;
  torch::nn::Linear out;
};

void train(const MatrixF& images, const Labels& labels, int channels, int size, const std::vector<std::string>& names,
           const std::vector<std::string>& phrasings, const GeneratorTrainOptions& o, std::string* module_out) {
  const int classes = static_cast<int>(names.size());
  const bool text = o.conditioning == Conditioning::Text;
  torch::manual_seed(derive_seed(o.seed, {static_cast<uint64_t>(Purpose::GeneratorTraining), 0}));
  const int W = o.width, quarter = size / 4, latent = o.latent;
  torch::jit::Module g(text ? "FednodeTextGenerator" : "FednodeLabelGenerator");
  std::vector<torch::Tensor> params;
  const auto parameter = [&](const char* name, torch::Tensor t) {
    g.register_parameter(name, t, false);
    params.push_back(t);
  };
  if (text) parameter("words", normal({kWordBuckets, kEmbedding}, 0, 1));
  else parameter("embed", normal({classes, kEmbedding}, 0, 1));
  parameter("fc_w", normal({2 * W * quarter * quarter, latent + kEmbedding}, 0, 0.02));
  parameter("fc_b", zeros({2 * W * quarter * quarter}, true));
  parameter("bn0_w", normal({2 * W}, 1, 0.02));
  parameter("bn0_b", zeros({2 * W}, true));
  parameter("up1_w", normal({2 * W, W, 4, 4}, 0, 0.02));
  parameter("up1_b", zeros({W}, true));
  parameter("bn1_w", normal({W}, 1, 0.02));
  parameter("bn1_b", zeros({W}, true));
  parameter("up2_w", normal({W, channels, 4, 4}, 0, 0.02));
  parameter("up2_b", zeros({channels}, true));
  g.register_buffer("bn0_mean", torch::zeros({2 * W}));
  g.register_buffer("bn0_var", torch::ones({2 * W}));
  g.register_buffer("bn1_mean", torch::zeros({W}));
  g.register_buffer("bn1_var", torch::ones({W}));
  g.define(generator_source(o.conditioning, W, quarter));
  torch::jit::Method draw = g.get_method("draw");
  // A text generator learns every phrasing of every class name: each image is drawn from one of
  // its class's texts, chosen at random, text (class c, phrasing p) being row c * P + p.
  std::vector<std::string> texts;
  for (const std::string& name : names)
    for (std::string phrase : phrasings) {
      for (size_t at; (at = phrase.find("{name}")) != std::string::npos;) phrase.replace(at, 6, name);
      texts.push_back(phrase);
    }
  const c10::List<std::string> text_list(texts), no_negatives(std::vector<std::string>(texts.size()));
  const int64_t P = static_cast<int64_t>(phrasings.size());

  auto d = std::make_shared<Discriminator>(channels + classes, W, quarter);
  torch::optim::Adam opt_g(params, torch::optim::AdamOptions(o.lr).betas({o.beta1, 0.999}));
  torch::optim::Adam opt_d(d->parameters(), torch::optim::AdamOptions(o.lr).betas({o.beta1, 0.999}));

  const torch::Tensor X = to_tensor(images).view({images.rows(), channels, size, size});
  torch::Tensor Y = torch::empty({images.rows()}, torch::kInt64);
  for (int64_t i = 0; i < images.rows(); ++i) Y[i] = static_cast<int64_t>(labels[static_cast<size_t>(i)]);
  const torch::Tensor eye = torch::eye(classes);
  const int64_t n = images.rows(), B = o.batch_size;
  Rng shuffle = Rng::stream(o.seed, Purpose::GeneratorTraining, 1);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  const auto bce = [](const torch::Tensor& logits, double target) {
    return torch::binary_cross_entropy_with_logits(logits, torch::full_like(logits, target));
  };
  const GraphAsWritten as_written;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[shuffle.below(static_cast<uint64_t>(i + 1))]);
    double loss_d = 0, loss_g = 0;
    int64_t batches = 0;
    for (int64_t at = 0; at + B <= n; at += B) {  // whole batches: batch norm on one sample says nothing
      interruption_point(o.stop);
      const torch::Tensor index = torch::from_blob(order.data() + at, {B}, torch::kInt64).clone();
      const torch::Tensor real = X.index_select(0, index), y = Y.index_select(0, index);
      const torch::Tensor onehot = eye.index_select(0, y);
      torch::Tensor condition;
      if (text) {
        const torch::Tensor phrasing = torch::randint(P, {B}, torch::kInt64);
        const torch::Tensor encoded = g.run_method("encode", text_list, no_negatives).toTensor();
        condition = encoded.index_select(0, y * P + phrasing);
      } else {
        condition = torch::embedding(g.attr("embed").toTensor(), y);
      }
      const torch::Tensor fake = draw({torch::randn({B, latent}), condition, true}).toTensor();

      opt_d.zero_grad();
      const torch::Tensor ld = bce(d->forward(real, onehot), 1.0) + bce(d->forward(fake.detach(), onehot), 0.0);
      ld.backward();
      opt_d.step();

      opt_g.zero_grad();
      const torch::Tensor lg = bce(d->forward(fake, onehot), 1.0);  // the non-saturating loss
      lg.backward();
      opt_g.step();
      loss_d += ld.item<double>();
      loss_g += lg.item<double>();
      ++batches;
    }
    if (!std::isfinite(loss_d) || !std::isfinite(loss_g))
      throw InputError("train-generator: training diverged in epoch " + std::to_string(epoch) +
                       " (a loss is NaN or Inf); try a lower --lr");
    if (o.progress) {
      char line[160];
      std::snprintf(line, sizeof line, "train-generator: epoch %d/%d: discriminator loss %.3f, generator loss %.3f, %.1f s",
                    epoch, o.epochs, loss_d / static_cast<double>(std::max<int64_t>(batches, 1)),
                    loss_g / static_cast<double>(std::max<int64_t>(batches, 1)),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      o.progress(line);
    }
  }
  for (torch::Tensor& p : params) p.set_requires_grad(false);
  std::ostringstream bytes;
  g.save(bytes);
  *module_out = bytes.str();
}

// A text generator's embedding of every request's text: [texts, E], checked before use.
torch::Tensor encode_texts(torch::jit::Module& g, const DrawConditions& c) {
  if (!g.find_method("encode"))
    throw InputError("generator: its sidecar says kind = text, but the module has no encode(texts, negative_texts)");
  torch::Tensor e;
  try {
    e = g.run_method("encode", c10::List<std::string>(c.texts), c10::List<std::string>(c.negative_texts)).toTensor();
  } catch (const c10::Error& err) {
    throw InputError(std::string("generator: its encode(texts, negative_texts) failed: ") + err.what_without_backtrace());
  }
  const int64_t m = static_cast<int64_t>(c.texts.size());
  if (e.dim() != 2 || e.size(0) != m)
    throw InputError("generator: encode(texts, negative_texts) gave a tensor of shape " + c10::str(e.sizes()) +
                     " for " + std::to_string(m) + " texts; expected [" + std::to_string(m) + ", E]");
  return e.to(torch::kFloat32);
}

void draw(const std::string& module, const MatrixF& z, const DrawConditions& conditions, int channels, int size,
          const std::atomic<bool>* stop, MatrixF* out) {
  torch::NoGradGuard no_grad;
  std::istringstream in(module);
  torch::jit::Module g;
  try {
    g = torch::jit::load(in);
  } catch (const c10::Error& e) {
    throw InputError(std::string("generator: not a TorchScript module: ") + e.what_without_backtrace());
  }
  g.eval();
  const bool text = !conditions.texts.empty();
  const char* call = text ? "forward(z, text_embedding)" : "forward(z, labels)";
  const int64_t n = z.rows(), pixels = int64_t{channels} * size * size;
  out->resize(n, pixels);
  const torch::Tensor Z = to_tensor(z);
  const torch::Tensor rows =
      torch::from_blob(const_cast<int64_t*>(conditions.rows.data()), {n}, torch::kInt64);
  const torch::Tensor embedded = text ? encode_texts(g, conditions) : torch::Tensor();
  constexpr int64_t kChunk = 256;  // bounds the activations held at once, whatever n is
  for (int64_t at = 0; at < n; at += kChunk) {
    interruption_point(stop);
    const int64_t m = std::min(kChunk, n - at);
    const torch::Tensor condition = text ? embedded.index_select(0, rows.narrow(0, at, m)) : rows.narrow(0, at, m);
    torch::Tensor x;
    try {
      x = g.forward({Z.narrow(0, at, m), condition}).toTensor();
    } catch (const c10::Error& e) {
      throw InputError(std::string("generator: its ") + call + " failed: " + e.what_without_backtrace());
    }
    if (x.dim() != 4 || x.size(0) != m || x.size(1) != channels || x.size(2) != size || x.size(3) != size)
      throw InputError(std::string("generator: ") + call + " gave a tensor of shape " + c10::str(x.sizes()) +
                       ", its sidecar promises [" + std::to_string(m) + ", " + std::to_string(channels) + ", " +
                       std::to_string(size) + ", " + std::to_string(size) + "]");
    out->middleRows(at, m) = to_matrix(x.to(torch::kFloat32).clamp(0.0, 1.0));
  }
}

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT void fednode_torch_generator_train(const fednode::MatrixF& images, const fednode::Labels& labels,
                                                        int channels, int size, const std::vector<std::string>& names,
                                                        const std::vector<std::string>& phrasings,
                                                        const fednode::GeneratorTrainOptions& options,
                                                        std::string* module) {
  fednode::train(images, labels, channels, size, names, phrasings, options, module);
}

FEDNODE_TORCH_EXPORT void fednode_torch_generator_draw(const std::string& module, const fednode::MatrixF& z,
                                                       const fednode::DrawConditions& conditions, int channels, int size,
                                                       const std::atomic<bool>* stop, fednode::MatrixF* out) {
  fednode::draw(module, z, conditions, channels, size, stop, out);
}
