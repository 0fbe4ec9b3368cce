// Head training with LibTorch, which runs inside libfednode_torch.so (core/torch_library.h).
#pragma once

#include "methods/heads/head.h"

#include <cstdint>
#include <functional>
#include <memory>

namespace fednode {

// Defaults measured on Fashion-MNIST (docs/methods/heads.md): with standardised inputs, FedPFT's
// Adam lr 1e-4 reaches scikit-learn's logistic-regression accuracy in 30 epochs on 60k samples.
struct LinearTrainOptions {
  double lr = 1e-4;          // FedPFT's reference: Adam, lr 1e-4
  int epochs = 30;
  // Small training sets (a node's local data) would get only a few hundred steps of lr 1e-4 in
  // `epochs` epochs and stop far from converged: they train for at least this many steps.
  int min_steps = 5000;
  int batch_size = 64;
  double weight_decay = 0.0;
  bool standardize = true;   // fit on standardised inputs, fold the scaling back into W, b
  uint64_t seed = 0;
  // LibTorch intra-op threads while training (0: leave LibTorch's setting alone). One by default:
  // LibTorch's OpenMP team spins between operations, and on a machine busy with anything else
  // two threads made the simulator's tests 17x slower (docs/performance.md); the products still
  // use OpenBLAS's threads.
  int threads = 1;
};

// FedTC's appendix: SGD, lr 1e-3, batch 64, 200 server epochs. On Fashion-MNIST prototypes the
// test accuracy stops improving after about 10k steps (docs/methods/heads.md), so fednode trains
// 50 epochs, or at least min_steps steps when there are few prototypes.
struct AdapterTrainOptions {
  int hidden1 = 1024;
  int hidden2 = 512;
  double lr = 1e-3;          // FedTC: SGD lr 1e-3, batch 64
  double momentum = 0.9;     // not stated by the paper
  int epochs = 50;
  int min_steps = 10000;     // few prototypes (a small node, an early chain node) still converge
  int batch_size = 64;
  double weight_decay = 0.0;
  uint64_t seed = 0;
  int threads = 1;           // as LinearTrainOptions::threads
  // Train on the features divided by their RMS value (one number for all), folded into the first
  // layer afterwards. Features far from unit size (CLIP's unit-norm embeddings, values ~0.04)
  // leave fc1's initial bias of ~1/sqrt(d) dominant, and the raw adapter then stays at chance.
  bool scale_inputs = true;
};

// The number of epochs a training run on n samples makes: max(epochs, the epochs that
// min_steps mini-batch steps take). Progress reports use it as their total.
int64_t training_epochs(int64_t n, int batch_size, int epochs, int min_steps);

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
