// Personalised FedCGS (paper 001, "FedCGS for personalized one-shot FL", Eq. 12) on a frozen
// backbone: once the federation's statistics are complete, a node trains a head of its own on its
// own data, with the global class means mu as a fixed alignment target. The paper fine-tunes the
// whole network, f(x; theta); here the backbone is frozen, so the aligned features are those of a
// low-rank residual adapter g(x) = x + U V^T x in front of a linear classifier:
//   min  mean CE(W g(x) + b, y) + lambda mean ||g(x) - mu_y||^2 + weight decay,
// trained by mini-batch SGD with momentum (the paper's 0.5, lr 0.01, weight decay 5e-4, batch
// 128, 200 local epochs) on standardised features scaled to norm about 1. The model is linear end to end, so the result
// folds into a LinearHead (W (I + U V^T), rescaled): a personal head is as cheap to use as any.
// lambda = 0 is the paper's Local-only baseline with the same model and recipe.
#pragma once

#include "core/types.h"
#include "methods/heads/head.h"
#include "methods/knowledge.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace fednode {

struct PersonalizeOptions {
  double learning_rate() const { return lr.value_or(from_global_head ? 1e-3 : 1e-2); }
  double lambda = 1.0;
  int rank = 16;         // of the adapter's U V^T
  int epochs = 200;
  int batch_size = 128;
  // Unset: the paper's 0.01 from scratch; 0.001 from the global head, whose LDA weights are large
  // in these units (0.01 diverged there on MobileNetV2 features, 0.001 gained on every node).
  std::optional<double> lr;
  double momentum = 0.5;
  double weight_decay = 5e-4;
  uint64_t seed = 0;
  // Start the classifier from the node's federation head (FedAvg-FT's idea, which the paper
  // finds the strongest baseline: the global model fine-tuned on local data) instead of zero.
  bool from_global_head = false;
};

// The global class means of complete statistics: row c is A_c / N_c; `present[c]` false (and the
// row zero) for a class with no samples.
MatrixD global_class_means(const StatsKnowledge& stats, std::vector<bool>* present);

// Throws InputError for no local data, shapes that disagree, a local class without a global mean,
// or options out of range.
// `start`, with from_global_head, is the linear head (W, b on the raw features) to start from.
std::unique_ptr<LinearHead> personalize_head(const Features& local, const MatrixD& global_means,
                                             const std::vector<bool>& present, const PersonalizeOptions& options,
                                             const LinearHead* start = nullptr);

// Accuracy (per class, as Head::per_class_accuracy gives it) as a node whose own data has `class_counts` would see it: each class's
// accuracy weighted by the node's share of that class (the expected accuracy on a test set drawn
// with the node's class proportions, without the noise of drawing one). Classes the test set lacks
// are left out of the weights.
double accuracy_in_proportion(const std::vector<ClassAccuracy>& per_class, const std::vector<int64_t>& class_counts);

}  // namespace fednode
