// Part of libfednode_torch.so (core/torch_library.h). Linear head (FedPFT's server-side
// classifier): nn.Linear(d, C) trained by softmax cross-entropy with Adam, on seeded mini-batches.
// Defaults and measurements: docs/methods/heads.md.
#include "methods/heads/train_torch.h"
#include "methods/heads/eigen_tensors.h"
#include "methods/heads/minibatch_loop.h"
#include "methods/heads/train_common.h"

#include <torch/torch.h>

namespace fednode {
namespace {

std::unique_ptr<LinearHead> train_linear(const Features& train, const LinearTrainOptions& opt, double lr,
                                         const EpochCallback& on_epoch, ValidationWatch* watch) {
  torch::NoGradGuard no_grad_outside_steps;

  const int64_t n = train.size();
  const int d = train.dim(), C = train.num_classes;

  // Standardising puts every feature on the same scale, which lets one learning rate suit
  // pixels, CLIP and ResNet features alike; the scaling is folded back into W and b at the end.
  Standardizer stdz;
  if (opt.standardize) stdz = fit_standardizer(train.X);

  const torch::Tensor X = to_tensor(train.X);
  const torch::Tensor y = label_tensor(train);
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
                                torch::optim::AdamWOptions(lr).weight_decay(opt.weight_decay));

  const auto scaled = [&](torch::Tensor x) { return opt.standardize ? (x - shift) * inv_scale : x; };
  torch::Tensor X_val, y_val;
  if (watch) {
    X_val = scaled(to_tensor(watch->validation().X));
    y_val = label_tensor(watch->validation());
  }
  const int64_t epochs = training_epochs(n, opt.batch_size, opt.epochs, opt.min_steps);
  run_minibatch_epochs(
      n, opt.batch_size, epochs, opt.seed,
      [&](const torch::Tensor& idx) {
        torch::Tensor xb = X.index_select(0, idx);
        xb = scaled(xb);
        const torch::Tensor yb = y.index_select(0, idx);
        torch::AutoGradMode grad_on(true);
        optimizer.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(linear->forward(xb), yb);
        loss.backward();
        optimizer.step();
        return loss.item<double>();
      },
      on_epoch,
      [&](int epoch) {
        if (!watch) return true;
        const auto [accuracy, loss] = validation_score(linear->forward(X_val), y_val);
        return watch->record(epoch, accuracy, loss);
      });

  MatrixF W = to_matrix(linear->weight);
  VectorF b = to_vector(linear->bias);
  if (opt.standardize) fold_standardizer(stdz, W, b);
  return std::make_unique<LinearHead>("linear", std::move(W), std::move(b));
}

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT fednode::LinearHead* fednode_torch_train_linear_head(
    const fednode::Features& train, const fednode::LinearTrainOptions& opt, double lr,
    const fednode::EpochCallback& on_epoch, fednode::ValidationWatch* watch) {
  return fednode::train_linear(train, opt, lr, on_epoch, watch).release();
}
