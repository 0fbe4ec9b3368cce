// Mini-batch SGD over one flat parameter vector, for the networks that fednode runs functionally
// on views of their parameters (FedMITR's ViT, FGL's CNN). Internal: includes LibTorch, so only
// *_torch.cpp files may include it.
#pragma once

#include "core/rng.h"
#include "core/types.h"

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

namespace fednode {

// torch.optim.SGD's update (momentum, weight decay) on a copy of `start`, over `epochs` passes of
// the n rows in an order drawn by the seeded `shuffle`; `batch_loss(flat, index)` is the loss on
// the rows `index`. After each epoch `after_epoch(epoch, mean loss)`, which may throw to stop.
// Throws InputError naming `what` when the parameters stop being finite. Returns the parameters.
inline torch::Tensor flat_sgd(const torch::Tensor& start, int64_t n, int epochs, int batch_size, double lr,
                              double momentum, double weight_decay, Rng shuffle, const char* what,
                              const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& batch_loss,
                              const std::function<void(int, double)>& after_epoch = {}) {
  torch::Tensor flat = start.clone().set_requires_grad(true);
  torch::optim::SGD sgd({flat}, torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay));
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle.below(i)]);
    double total = 0;
    for (int64_t first = 0; first < n; first += batch_size) {
      const int64_t m = std::min<int64_t>(batch_size, n - first);
      const torch::Tensor loss = batch_loss(flat, torch::from_blob(order.data() + first, {m}, torch::kInt64));
      sgd.zero_grad();
      loss.backward();
      sgd.step();
      if (after_epoch) total += loss.item<double>() * static_cast<double>(m);
    }
    if (!torch::isfinite(flat).all().item<bool>())
      throw InputError(std::string(what) + " diverged in epoch " + std::to_string(epoch + 1) + " (lower the learning rate)");
    if (after_epoch) after_epoch(epoch + 1, n ? total / static_cast<double>(n) : 0.0);
  }
  return flat.detach().contiguous();
}

}  // namespace fednode
