// Linear head (FedPFT's server-side classifier): nn.Linear(d, C) trained by softmax
// cross-entropy with Adam, on seeded mini-batches. Defaults and measurements: docs/methods/heads.md.
#include "methods/heads/train.h"
#include "methods/heads/minibatch_loop.h"
#include "methods/heads/train_common.h"

#include <torch/torch.h>

#include <cstring>

namespace fednode {
namespace {

torch::Tensor to_tensor(const MatrixF& m) {
  // MatrixF is row-major and contiguous: copy it as one block.
  torch::Tensor t = torch::empty({m.rows(), m.cols()}, torch::kFloat32);
  std::memcpy(t.data_ptr<float>(), m.data(), static_cast<size_t>(m.size()) * sizeof(float));
  return t;
}

MatrixF to_matrix(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous().to(torch::kFloat32);
  MatrixF m(c.size(0), c.size(1));
  std::memcpy(m.data(), c.data_ptr<float>(), static_cast<size_t>(m.size()) * sizeof(float));
  return m;
}

}  // namespace

std::unique_ptr<LinearHead> train_linear_head(const Features& train, const LinearTrainOptions& opt,
                                              const EpochCallback& on_epoch) {
  const std::string who = "linear head training";
  check_training_set(train, who);
  check_optimizer_settings(opt.lr, opt.epochs, opt.batch_size, opt.weight_decay, opt.threads, who);
  if (opt.min_steps < 0) throw InputError(who + ": min_steps must be >= 0, got " + std::to_string(opt.min_steps));
  TorchThreadsGuard threads(opt.threads);
  torch::NoGradGuard no_grad_outside_steps;

  const int64_t n = train.size();
  const int d = train.dim(), C = train.num_classes;

  // Standardising puts every feature on the same scale, which lets one learning rate suit
  // pixels, CLIP and ResNet features alike; the scaling is folded back into W and b at the end.
  Standardizer stdz;
  if (opt.standardize) stdz = fit_standardizer(train.X);

  const torch::Tensor X = to_tensor(train.X);
  const torch::Tensor y = torch::from_blob(const_cast<int32_t*>(train.y.data()), {n}, torch::kInt32)
                              .to(torch::kInt64);
  torch::Tensor shift, inv_scale;
  if (opt.standardize) {
    shift = torch::from_blob(const_cast<double*>(stdz.mean.data()), {d}, torch::kFloat64).to(torch::kFloat32);
    inv_scale = torch::from_blob(const_cast<double*>(stdz.scale.data()), {d}, torch::kFloat64)
                    .reciprocal()
                    .to(torch::kFloat32);
  }

  Rng init_rng = Rng::stream(opt.seed, Purpose::HeadInit);
  MatrixF W0(C, d);
  VectorF b0(C);
  pytorch_default_init(init_rng, W0, b0);
  torch::nn::Linear linear(torch::nn::LinearOptions(d, C));
  linear->weight.copy_(to_tensor(W0));
  linear->bias.copy_(torch::from_blob(b0.data(), {C}, torch::kFloat32));

  torch::optim::AdamW optimizer(linear->parameters(),
                                torch::optim::AdamWOptions(opt.lr).weight_decay(opt.weight_decay));

  const int64_t epochs = training_epochs(n, opt.batch_size, opt.epochs, opt.min_steps);
  run_minibatch_epochs(
      n, opt.batch_size, epochs, opt.seed,
      [&](const torch::Tensor& idx) {
        torch::Tensor xb = X.index_select(0, idx);
        if (opt.standardize) xb = (xb - shift) * inv_scale;
        const torch::Tensor yb = y.index_select(0, idx);
        torch::AutoGradMode grad_on(true);
        optimizer.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(linear->forward(xb), yb);
        loss.backward();
        optimizer.step();
        return loss.item<double>();
      },
      on_epoch);

  MatrixF W = to_matrix(linear->weight);
  VectorF b = to_matrix(linear->bias.reshape({1, C})).row(0).transpose();
  if (opt.standardize) fold_standardizer(stdz, W, b);
  return std::make_unique<LinearHead>("linear", std::move(W), std::move(b));
}

}  // namespace fednode
