// FedTC's server-side adapter and head (its appendix, Table 5):
//   FC(d, h1) - ReLU - normalize, FC(h1, h2) - ReLU - normalize, FC(h2, C)
// trained by cross-entropy with SGD on seeded mini-batches. Inference happens in AdapterHead
// (Eigen); adapter_scores_torch runs the very module used here, so the two can be compared.
#include "methods/heads/train.h"
#include "methods/heads/minibatch_loop.h"
#include "methods/heads/train_common.h"
#include "core/openmp_threads.h"

#include <torch/torch.h>

#include <cmath>
#include <cstring>

namespace fednode {
namespace {

constexpr int kMaxHidden = 1 << 16;

torch::Tensor to_tensor(const MatrixF& m) {
  torch::Tensor t = torch::empty({m.rows(), m.cols()}, torch::kFloat32);
  std::memcpy(t.data_ptr<float>(), m.data(), static_cast<size_t>(m.size()) * sizeof(float));
  return t;
}

torch::Tensor to_tensor(const VectorF& v) {
  torch::Tensor t = torch::empty({v.size()}, torch::kFloat32);
  std::memcpy(t.data_ptr<float>(), v.data(), static_cast<size_t>(v.size()) * sizeof(float));
  return t;
}

MatrixF to_matrix(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous().to(torch::kFloat32).reshape({t.size(0), -1});
  MatrixF m(c.size(0), c.size(1));
  std::memcpy(m.data(), c.data_ptr<float>(), static_cast<size_t>(m.size()) * sizeof(float));
  return m;
}

VectorF to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous().to(torch::kFloat32);
  VectorF v(c.size(0));
  std::memcpy(v.data(), c.data_ptr<float>(), static_cast<size_t>(v.size()) * sizeof(float));
  return v;
}

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

}  // namespace

std::unique_ptr<AdapterHead> train_adapter_head(const Features& train, const AdapterTrainOptions& opt,
                                                const EpochCallback& on_epoch) {
  const std::string who = "adapter head training";
  check_training_set(train, who);
  check_optimizer_settings(opt.lr, opt.epochs, opt.batch_size, opt.weight_decay, opt.threads, who);
  if (opt.hidden1 < 1 || opt.hidden1 > kMaxHidden || opt.hidden2 < 1 || opt.hidden2 > kMaxHidden)
    throw InputError(who + ": hidden sizes must be in [1, " + std::to_string(kMaxHidden) + "], got " +
                     std::to_string(opt.hidden1) + " and " + std::to_string(opt.hidden2));
  if (opt.min_steps < 0) throw InputError(who + ": min_steps must be >= 0, got " + std::to_string(opt.min_steps));
  if (!(opt.momentum >= 0.0 && opt.momentum < 1.0))
    throw InputError(who + ": momentum must be in [0, 1), got " + std::to_string(opt.momentum));
  TorchThreadsGuard threads(opt.threads);

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
      torch::optim::SGDOptions(opt.lr).momentum(opt.momentum).weight_decay(opt.weight_decay));

  // One scale for every feature, not per-column standardisation: the adapter's geometry (ReLU,
  // then L2 normalisation) stays the paper's, and only the size of the inputs stops mattering.
  Standardizer scaling;
  if (opt.scale_inputs) {
    const double rms = std::sqrt(train.X.cast<double>().squaredNorm() / static_cast<double>(train.X.size()));
    scaling.mean = VectorD::Zero(d);
    scaling.scale = VectorD::Constant(d, rms > 0 && std::isfinite(rms) ? rms : 1.0);
  }
  const torch::Tensor X = to_tensor(opt.scale_inputs ? standardized(scaling, train.X) : train.X);
  const torch::Tensor y = torch::from_blob(const_cast<int32_t*>(train.y.data()), {n}, torch::kInt32)
                              .to(torch::kInt64);
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
      on_epoch);
  std::vector<AdapterHead::Layer> layers = net->layers();
  if (opt.scale_inputs) fold_standardizer(scaling, layers[0].W, layers[0].b);  // fc1 is linear in x
  return std::make_unique<AdapterHead>(std::move(layers));
}

MatrixF adapter_scores_torch(const AdapterHead& head, const MatrixF& X) {
  adopt_openmp_thread_default(at::set_num_threads);  // before the first LibTorch call of this thread
  if (X.cols() != head.dim())
    throw InputError("adapter expects " + std::to_string(head.dim()) + " features, got " +
                     std::to_string(X.cols()));
  const auto& layers = head.layers();
  AdapterNet net(head.dim(), static_cast<int>(layers[0].W.rows()), static_cast<int>(layers[1].W.rows()),
                 head.num_classes());
  net->set_layers(layers);
  torch::NoGradGuard no_grad;
  return to_matrix(net->forward(to_tensor(X)));
}

}  // namespace fednode
