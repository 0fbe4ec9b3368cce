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
#include "methods/method.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace fednode {


// The seed of node `node`'s personal head in a run of seed `run_seed` (the simulator and the
// networked node draw the same).
uint64_t personal_seed(uint64_t run_seed, NodeId node);

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
