// Head training with LibTorch, which runs inside libfednode_torch.so (core/torch_library.h).
#pragma once

#include "methods/heads/head.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

// How a head's learning rate and length are chosen when its `lr` is left unset: each candidate
// trains on part of the training set while the rest, held out class by class, scores it after
// every epoch; the candidate and epoch that score best there are then trained on the whole
// set. The test set is never seen (docs/methods/heads.md, "Chosen on a validation split").
struct ValidationChoice {
  // Tried in this order, a tie going to the earlier. Fastest first: a slower rate is then given
  // four times the epochs the best one before it needed (ValidationWatch), so that the slowest
  // candidate, which would otherwise train the longest, costs the least.
  std::vector<double> lrs;
  double fraction = 0.2;    // held out of every class that has at least two samples
};

// What the choice found, for progress lines and reports.
struct HeadChoice {
  double lr = 0.0;
  int epochs = 0;                 // trained on the whole set
  int64_t validation_samples = 0; // 0: nothing could be held out, lrs.front() was used untried
  struct Tried {
    double lr;
    double accuracy;  // best validation accuracy it reached
    int epoch;        // 1-based epoch where it did
  };
  std::vector<Tried> tried;
  std::string summary() const;  // "lr 0.01, 37 epochs (validation 0.912 of 228; 0.001: 0.85, ...)"
};

// Defaults measured on Fashion-MNIST (docs/methods/heads.md): with standardised inputs, FedPFT's
// Adam lr 1e-4 reaches scikit-learn's logistic-regression accuracy in 30 epochs on 60k samples.
struct LinearTrainOptions {
  // Unset: chosen on a validation split from `choice.lrs` (the default, since no one rate suits
  // every class count and set size: heads.md); set, FedPFT's fixed recipe is lr 1e-4.
  std::optional<double> lr;
  ValidationChoice choice{{1e-2, 1e-3, 1e-4}, 0.2};
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
  // Unset: chosen on a validation split from `choice.lrs`; the paper's fixed recipe is lr 1e-3,
  // which underfits on many classes with few samples (0.51 where 0.1 gives 0.68: results.md).
  std::optional<double> lr;
  ValidationChoice choice{{1e-1, 1e-2, 1e-3}, 0.2};
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

// Trains a linear head by softmax cross-entropy. With opt.lr unset, the learning rate and
// epochs are chosen first (ValidationChoice); `chosen`, when given, says what was chosen.
// on_epoch is called for the candidates' epochs too.
std::unique_ptr<LinearHead> train_linear_head(const Features& train, const LinearTrainOptions& opt,
                                              const EpochCallback& on_epoch = {},
                                              HeadChoice* chosen = nullptr);

std::unique_ptr<AdapterHead> train_adapter_head(const Features& train, const AdapterTrainOptions& opt,
                                                const EpochCallback& on_epoch = {},
                                                HeadChoice* chosen = nullptr);

// The learning rate as text: the number, or "auto" when it is chosen on a validation split.
std::string lr_text(const std::optional<double>& lr);

// The adapter's forward pass through the LibTorch module that train_adapter_head trains, for
// checking AdapterHead's Eigen inference against it (and any exported copy against both).
MatrixF adapter_scores_torch(const AdapterHead& head, const MatrixF& X);

}  // namespace fednode
