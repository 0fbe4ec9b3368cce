// Head training with LibTorch. The LibTorch headers stay inside the .cpp files.
#pragma once

#include "methods/heads/head.h"

#include <cstdint>
#include <functional>
#include <memory>

namespace fednode {

struct LinearTrainOptions {
  double lr = 1e-4;          // FedPFT's reference: Adam, lr 1e-4
  int epochs = 50;
  int batch_size = 64;
  double weight_decay = 0.0;
  bool standardize = false;  // fit on standardised inputs, fold the scaling back into W, b
  uint64_t seed = 0;
  int threads = 0;           // 0: leave LibTorch's setting alone
};

struct AdapterTrainOptions {
  int hidden1 = 1024;
  int hidden2 = 512;
  double lr = 1e-3;          // FedTC: SGD lr 1e-3, batch 64
  double momentum = 0.9;
  int epochs = 100;
  int batch_size = 64;
  double weight_decay = 0.0;
  uint64_t seed = 0;
  int threads = 0;
};

// Called after each epoch with (epoch, mean training loss); may be empty.
using EpochCallback = std::function<void(int, double)>;

// Trains a linear head by softmax cross-entropy.
std::unique_ptr<LinearHead> train_linear_head(const Features& train, const LinearTrainOptions& opt,
                                              const EpochCallback& on_epoch = {});

std::unique_ptr<AdapterHead> train_adapter_head(const Features& train, const AdapterTrainOptions& opt,
                                                const EpochCallback& on_epoch = {});

// The adapter's forward pass through the LibTorch module that train_adapter_head trains, for
// checking AdapterHead's Eigen inference against it (and any exported copy against both).
MatrixF adapter_scores_torch(const AdapterHead& head, const MatrixF& X);

}  // namespace fednode
