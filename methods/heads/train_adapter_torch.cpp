// Part of libfednode_torch.so (core/torch_library.h). FedTC's server-side adapter and head
// (its appendix, Table 5):
//   FC(d, h1) - ReLU - normalize, FC(h1, h2) - ReLU - normalize, FC(h2, C)
// trained by cross-entropy with SGD on seeded mini-batches. Inference happens in AdapterHead
// (Eigen); adapter_scores_torch runs the very module used here, so the two can be compared.
#include "methods/heads/train_torch.h"
#include "methods/heads/eigen_tensors.h"
#include "methods/heads/minibatch_loop.h"
#include "methods/heads/train_common.h"

#include <torch/torch.h>

#include <cmath>

namespace fednode {
namespace {

struct AdapterNetImpl : torch::nn::Module {
  AdapterNetImpl(int d, int h1, int h2, int C)
      : fc1(register_module("fc1", torch::nn::Linear(d, h1))),
        fc2(register_module("fc2", torch::nn::Linear(h1, h2))),
        fc3(register_module("fc3", torch::nn::Linear(h2, C))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    // torch.nn.functional.normalize's defaults (p=2, dim=1, eps=1e-12), as the FedTC appendix says.
    namespace F = torch::nn::functional;
    const auto l2 = F::NormalizeFuncOptions().p(2).dim(1).eps(1e-12);
    torch::Tensor h = F::normalize(torch::relu(fc1->forward(x)), l2);
    h = F::normalize(torch::relu(fc2->forward(h)), l2);
    return fc3->forward(h);
  }

  void set_layers(const std::vector<AdapterHead::Layer>& layers) {
    torch::NoGradGuard no_grad;
    torch::nn::Linear* fcs[3] = {&fc1, &fc2, &fc3};
    for (size_t i = 0; i < 3; ++i) {
      (*fcs[i])->weight.copy_(to_tensor(layers[i].W));
      (*fcs[i])->bias.copy_(to_tensor(layers[i].b));
    }
  }

  std::vector<AdapterHead::Layer> layers() const {
    std::vector<AdapterHead::Layer> out;
    for (const torch::nn::Linear* fc : {&fc1, &fc2, &fc3})
      out.push_back({to_matrix((*fc)->weight), to_vector((*fc)->bias)});
    return out;
  }

  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(AdapterNet);

std::unique_ptr<AdapterHead> train_adapter(const Features& train, const AdapterTrainOptions& opt, double lr,
                                           const EpochCallback& on_epoch, ValidationWatch* watch) {
  const int64_t n = train.size();
  const int d = train.dim(), C = train.num_classes;

  // Same distribution as PyTorch's default initialisation, drawn from our own seeded stream.
  Rng init_rng = Rng::stream(opt.seed, Purpose::HeadInit);
  std::vector<AdapterHead::Layer> init(3);
  const int sizes[4] = {d, opt.hidden1, opt.hidden2, C};
  for (int i = 0; i < 3; ++i) {
    init[i].W.resize(sizes[i + 1], sizes[i]);
    init[i].b.resize(sizes[i + 1]);
    pytorch_default_init(init_rng, init[i].W, init[i].b);
  }
  AdapterNet net(d, opt.hidden1, opt.hidden2, C);
  net->set_layers(init);

  torch::optim::SGD optimizer(
      net->parameters(),
      torch::optim::SGDOptions(lr).momentum(opt.momentum).weight_decay(opt.weight_decay));

  // One scale for every feature, not per-column standardisation: the adapter's geometry (ReLU,
  // then L2 normalisation) stays the paper's, and only the size of the inputs stops mattering.
  Standardizer scaling;
  if (opt.scale_inputs) {
    const double rms = std::sqrt(train.X.cast<double>().squaredNorm() / static_cast<double>(train.X.size()));
    scaling.mean = VectorD::Zero(d);
    scaling.scale = VectorD::Constant(d, rms > 0 && std::isfinite(rms) ? rms : 1.0);
  }
  const auto scaled = [&](const MatrixF& x) { return to_tensor(opt.scale_inputs ? standardized(scaling, x) : x); };
  const torch::Tensor X = scaled(train.X);
  const torch::Tensor y = label_tensor(train);
  torch::Tensor X_val, y_val;
  if (watch) {
    X_val = scaled(watch->validation().X);
    y_val = label_tensor(watch->validation());
  }
  const int64_t epochs = training_epochs(n, opt.batch_size, opt.epochs, opt.min_steps);
  run_minibatch_epochs(
      n, opt.batch_size, epochs, opt.seed,
      [&](const torch::Tensor& idx) {
        optimizer.zero_grad();
        torch::Tensor loss =
            torch::nn::functional::cross_entropy(net->forward(X.index_select(0, idx)), y.index_select(0, idx));
        loss.backward();
        optimizer.step();
        return loss.item<double>();
      },
      on_epoch,
      [&](int epoch) {
        if (!watch) return true;
        torch::NoGradGuard no_grad;
        const auto [accuracy, loss] = validation_score(net->forward(X_val), y_val);
        return watch->record(epoch, accuracy, loss);
      });
  std::vector<AdapterHead::Layer> layers = net->layers();
  if (opt.scale_inputs) fold_standardizer(scaling, layers[0].W, layers[0].b);  // fc1 is linear in x
  return std::make_unique<AdapterHead>(std::move(layers));
}

MatrixF adapter_scores(const AdapterHead& head, const MatrixF& X) {
  const auto& layers = head.layers();
  AdapterNet net(head.dim(), static_cast<int>(layers[0].W.rows()), static_cast<int>(layers[1].W.rows()),
                 head.num_classes());
  net->set_layers(layers);
  torch::NoGradGuard no_grad;
  return to_matrix(net->forward(to_tensor(X)));
}

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT fednode::AdapterHead* fednode_torch_train_adapter_head(
    const fednode::Features& train, const fednode::AdapterTrainOptions& opt, double lr,
    const fednode::EpochCallback& on_epoch, fednode::ValidationWatch* watch) {
  return fednode::train_adapter(train, opt, lr, on_epoch, watch).release();
}

FEDNODE_TORCH_EXPORT fednode::MatrixF fednode_torch_adapter_scores(const fednode::AdapterHead& head,
                                                                   const fednode::MatrixF& X) {
  return fednode::adapter_scores(head, X);
}
