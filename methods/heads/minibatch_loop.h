// The shuffled mini-batch loop both head trainers share. Internal: includes LibTorch, so only
// the *_torch.cpp trainers may include it.
#pragma once

#include "methods/heads/train.h"
#include "methods/heads/train_common.h"
#include "core/rng.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace fednode {

// Runs up to `epochs` passes over n samples in batches of at most batch_size, reshuffled every
// epoch by a seeded stream. `step(idx)` trains on the rows in `idx` and returns the batch's mean
// loss; `go_on(epoch)`, called after each epoch, ends training early by returning false.
template <typename Step, typename GoOn>
void run_minibatch_epochs(int64_t n, int batch_size, int64_t epochs, uint64_t seed, Step&& step,
                          const EpochCallback& on_epoch, GoOn&& go_on) {
  Rng shuffle_rng = Rng::stream(seed, Purpose::HeadShuffle);
  const int64_t batch = std::min<int64_t>(batch_size, n);
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    const std::vector<int64_t> order = shuffled_order(shuffle_rng, n);
    const torch::Tensor perm = torch::from_blob(const_cast<int64_t*>(order.data()), {n}, torch::kInt64);
    double loss_sum = 0.0;
    for (int64_t start = 0; start < n; start += batch) {
      const int64_t len = std::min(batch, n - start);
      loss_sum += step(perm.narrow(0, start, len)) * static_cast<double>(len);
    }
    if (on_epoch) on_epoch(static_cast<int>(epoch), loss_sum / static_cast<double>(n));
    if (!go_on(static_cast<int>(epoch))) break;
  }
}

// Scores logits against labels for a ValidationWatch: (accuracy, mean cross-entropy).
inline std::pair<double, double> validation_score(const torch::Tensor& logits, const torch::Tensor& labels) {
  const double accuracy = logits.argmax(1).eq(labels).to(torch::kFloat64).mean().item<double>();
  const double loss = torch::nn::functional::cross_entropy(logits, labels).item<double>();
  return {accuracy, loss};
}

// The labels of a feature set as the int64 tensor cross-entropy takes.
inline torch::Tensor label_tensor(const Features& f) {
  return torch::from_blob(const_cast<int32_t*>(f.y.data()), {static_cast<int64_t>(f.y.size())}, torch::kInt32)
      .to(torch::kInt64);
}

}  // namespace fednode
