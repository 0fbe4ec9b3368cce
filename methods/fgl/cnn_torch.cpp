// Part of libfednode_torch.so (core/torch_library.h): cnn.h's network on views of its flat
// parameters.
#include "methods/fgl/cnn_torch.h"

#include "core/rng.h"
#include "methods/heads/eigen_tensors.h"
#include "methods/heads/flat_sgd_torch.h"

#include <torch/torch.h>

#include <cmath>

namespace fednode {
namespace {

namespace F = torch::nn::functional;

torch::Tensor logits(const CnnSpec& s, const torch::Tensor& flat, const torch::Tensor& x) {
  std::vector<torch::Tensor> p;
  int64_t at = 0;
  for (const auto& shape : cnn_layer_shapes(s)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    p.push_back(flat.narrow(0, at, n).view(shape));
    at += n;
  }
  torch::Tensor h = x.view({x.size(0), s.channels, s.image_size, s.image_size});
  h = F::max_pool2d(torch::relu(F::conv2d(h, p[0], F::Conv2dFuncOptions().bias(p[1]).padding(1))), F::MaxPool2dFuncOptions(2));
  h = F::max_pool2d(torch::relu(F::conv2d(h, p[2], F::Conv2dFuncOptions().bias(p[3]).padding(1))), F::MaxPool2dFuncOptions(2));
  h = torch::relu(F::linear(h.flatten(1), p[4], p[5]));
  return F::linear(h, p[6], p[7]);
}

torch::Tensor flat_of(const CnnModel& m) {
  return torch::from_blob(const_cast<float*>(m.parameters.data()), {static_cast<int64_t>(m.parameters.size())},
                          torch::kFloat32);
}

void train(const CnnModel& start, const MatrixF& images, const Labels& labels, const CnnTrainOptions& o, CnnModel* out) {
  const int64_t n = images.rows();
  const torch::Tensor X = to_tensor(images);
  torch::Tensor y = torch::empty({n}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int64_t>(labels[static_cast<size_t>(i)]);
  const int64_t steps_per_epoch = (n + o.batch_size - 1) / o.batch_size;
  const int epochs = static_cast<int>(std::max<int64_t>(o.epochs, (o.min_steps + steps_per_epoch - 1) / steps_per_epoch));
  const torch::Tensor done = flat_sgd(
      flat_of(start), n, epochs, o.batch_size, o.lr, o.momentum, o.weight_decay, Rng::stream(o.seed, Purpose::HeadShuffle, 0xC44),
      "the CNN's training",
      [&](const torch::Tensor& flat, const torch::Tensor& index) {
        return F::cross_entropy(logits(start.spec, flat, X.index_select(0, index)), y.index_select(0, index));
      },
      o.after_epoch);
  out->spec = start.spec;
  out->parameters.assign(done.data_ptr<float>(), done.data_ptr<float>() + done.numel());
}

void scores(const CnnModel& m, const MatrixF& images, MatrixF* out) {
  torch::NoGradGuard no_grad;
  *out = to_matrix(logits(m.spec, flat_of(m), to_tensor(images)));
}

}  // namespace
}  // namespace fednode

FEDNODE_TORCH_EXPORT void fednode_torch_cnn_train(const fednode::CnnModel& start, const fednode::MatrixF& images,
                                                  const fednode::Labels& labels, const fednode::CnnTrainOptions& options,
                                                  fednode::CnnModel* out) {
  fednode::train(start, images, labels, options, out);
}

FEDNODE_TORCH_EXPORT void fednode_torch_cnn_scores(const fednode::CnnModel& model, const fednode::MatrixF& images,
                                                   fednode::MatrixF* out) {
  fednode::scores(model, images, out);
}
