// Head training: arguments are checked here, before LibTorch is loaded, so that a bad setting is
// refused without its start-up; the learning rate is chosen here when it is not given; the
// training itself runs in libfednode_torch.so (train_linear_torch.cpp, train_adapter_torch.cpp)
// under the thread counts set here.
#include "methods/heads/train.h"
#include "methods/heads/train_common.h"
#include "methods/heads/train_torch.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace fednode {
namespace {

constexpr int kMaxHidden = 1 << 16;

void check_choice(const std::optional<double>& lr, const ValidationChoice& choice, const std::string& who) {
  if (lr) return;
  if (choice.lrs.empty()) throw InputError(who + ": no learning rate given and no candidates to choose one from");
  for (double c : choice.lrs)
    if (!(c > 0.0) || !std::isfinite(c))
      throw InputError(who + ": candidate learning rates must be positive and finite, got " + std::to_string(c));
  if (!(choice.fraction > 0.0 && choice.fraction < 1.0))
    throw InputError(who + ": validation fraction must be in (0, 1), got " + std::to_string(choice.fraction));
}

// Trains with the given learning rate, or chooses one first: every candidate trains on the fit
// part of a stratified split, scored on the held-out part after each epoch until its watch stops
// it; the best candidate (a tie to the earlier) is then trained on the whole set for the epochs
// that scored best, so the held-out samples are learnt from too. `train_with(data, options, lr,
// on_epoch, watch)` is the LibTorch trainer.
template <typename Head, typename Options, typename Trainer>
std::unique_ptr<Head> train_choosing_lr(const Features& train, const Options& opt, const EpochCallback& on_epoch,
                                        HeadChoice* chosen, Trainer&& train_with) {
  if (opt.lr) return std::unique_ptr<Head>(train_with(train, opt, *opt.lr, on_epoch, nullptr));
  HeadChoice choice;
  const uint64_t split_seed = derive_seed(opt.seed, {static_cast<uint64_t>(Purpose::HeadValidation)});
  const ValidationSplit split = split_for_validation(train, opt.choice.fraction, split_seed);
  choice.validation_samples = split.validation.size();
  Options final_opt = opt;
  if (split.validation.size() == 0) {
    // No class has two samples: nothing to hold out, and any choice would be a guess.
    choice.lr = opt.choice.lrs.front();
    choice.epochs = static_cast<int>(training_epochs(train.size(), opt.batch_size, opt.epochs, opt.min_steps));
  } else {
    std::optional<ValidationWatch> leader;
    int best = -1;
    for (double lr : opt.choice.lrs) {
      ValidationWatch watch(split.validation, leader ? &*leader : nullptr);
      std::unique_ptr<Head>(train_with(split.fit, opt, lr, on_epoch, &watch));  // only its scores count
      choice.tried.push_back({lr, watch.best_accuracy(), watch.best_epoch() + 1});
      if (!leader || watch.beats(*leader)) {
        best = static_cast<int>(choice.tried.size()) - 1;
        leader = watch;
      }
    }
    choice.lr = choice.tried[static_cast<size_t>(best)].lr;
    choice.epochs = choice.tried[static_cast<size_t>(best)].epoch;
    final_opt.epochs = choice.epochs;
    final_opt.min_steps = 0;  // the chosen epochs are the length; min_steps bounded the candidates
  }
  std::unique_ptr<Head> head(train_with(train, final_opt, choice.lr, on_epoch, nullptr));
  if (chosen) *chosen = std::move(choice);
  return head;
}

}  // namespace

std::string lr_text(const std::optional<double>& lr) {
  if (!lr) return "auto";
  char text[32];
  std::snprintf(text, sizeof text, "%g", *lr);
  return text;
}

std::string HeadChoice::summary() const {
  std::string s = "lr " + lr_text(lr) + ", " + std::to_string(epochs) + " epochs";
  if (validation_samples == 0) return s + " (no class has two samples to hold one out: not chosen)";
  char acc[32];
  s += " chosen on " + std::to_string(validation_samples) + " held-out samples (";
  for (size_t i = 0; i < tried.size(); ++i) {
    std::snprintf(acc, sizeof acc, "%.4f", tried[i].accuracy);
    s += (i ? "; " : "") + lr_text(tried[i].lr) + ": " + acc + " at epoch " + std::to_string(tried[i].epoch);
  }
  return s + ")";
}

std::unique_ptr<LinearHead> train_linear_head(const Features& train, const LinearTrainOptions& opt,
                                              const EpochCallback& on_epoch, HeadChoice* chosen) {
  const std::string who = "linear head training";
  check_training_set(train, who);
  check_choice(opt.lr, opt.choice, who);
  check_optimizer_settings(opt.lr.value_or(opt.choice.lrs.front()), opt.epochs, opt.batch_size, opt.weight_decay,
                           opt.threads, who);
  if (opt.min_steps < 0) throw InputError(who + ": min_steps must be >= 0, got " + std::to_string(opt.min_steps));
  auto& train_torch =
      torch_function<decltype(fednode_torch_train_linear_head)>("fednode_torch_train_linear_head");
  TorchThreadsGuard threads(opt.threads);
  return train_choosing_lr<LinearHead>(train, opt, on_epoch, chosen, train_torch);
}

std::unique_ptr<AdapterHead> train_adapter_head(const Features& train, const AdapterTrainOptions& opt,
                                                const EpochCallback& on_epoch, HeadChoice* chosen) {
  const std::string who = "adapter head training";
  check_training_set(train, who);
  check_choice(opt.lr, opt.choice, who);
  check_optimizer_settings(opt.lr.value_or(opt.choice.lrs.front()), opt.epochs, opt.batch_size, opt.weight_decay,
                           opt.threads, who);
  if (opt.hidden1 < 1 || opt.hidden1 > kMaxHidden || opt.hidden2 < 1 || opt.hidden2 > kMaxHidden)
    throw InputError(who + ": hidden sizes must be in [1, " + std::to_string(kMaxHidden) + "], got " +
                     std::to_string(opt.hidden1) + " and " + std::to_string(opt.hidden2));
  if (opt.min_steps < 0) throw InputError(who + ": min_steps must be >= 0, got " + std::to_string(opt.min_steps));
  if (!(opt.momentum >= 0.0 && opt.momentum < 1.0))
    throw InputError(who + ": momentum must be in [0, 1), got " + std::to_string(opt.momentum));
  auto& train_torch =
      torch_function<decltype(fednode_torch_train_adapter_head)>("fednode_torch_train_adapter_head");
  TorchThreadsGuard threads(opt.threads);
  return train_choosing_lr<AdapterHead>(train, opt, on_epoch, chosen, train_torch);
}

MatrixF adapter_scores_torch(const AdapterHead& head, const MatrixF& X) {
  if (X.cols() != head.dim())
    throw InputError("adapter expects " + std::to_string(head.dim()) + " features, got " +
                     std::to_string(X.cols()));
  auto& scores = torch_function<decltype(fednode_torch_adapter_scores)>("fednode_torch_adapter_scores");
  torch_threads();  // LibTorch starts from OpenMP's thread default, as everywhere in fednode
  return scores(head, X);
}

}  // namespace fednode
