// The shuffled mini-batch loop both head trainers share. Internal: includes LibTorch, so only
// the *_torch.cpp trainers may include it.
#pragma once

#include "methods/heads/train.h"
#include "methods/heads/train_common.h"
#include "core/rng.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

namespace fednode {

// Runs `epochs` passes over n samples in batches of at most batch_size, reshuffled every epoch by a
// seeded stream. `step(idx)` trains on the rows in `idx` and returns the batch's mean loss.
template <typename Step>
void run_minibatch_epochs(int64_t n, int batch_size, int64_t epochs, uint64_t seed, Step&& step,
                          const EpochCallback& on_epoch) {
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
  }
}

}  // namespace fednode
