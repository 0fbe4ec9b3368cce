// Head training: arguments are checked here, before LibTorch is loaded, so that a bad setting is
// refused without its start-up; the training itself runs in libfednode_torch.so
// (train_linear_torch.cpp, train_adapter_torch.cpp) under the thread counts set here.
#include "methods/heads/train.h"
#include "methods/heads/train_common.h"
#include "methods/heads/train_torch.h"

#include <string>

namespace fednode {
namespace {

constexpr int kMaxHidden = 1 << 16;

}  // namespace

std::unique_ptr<LinearHead> train_linear_head(const Features& train, const LinearTrainOptions& opt,
                                              const EpochCallback& on_epoch) {
  const std::string who = "linear head training";
  check_training_set(train, who);
  check_optimizer_settings(opt.lr, opt.epochs, opt.batch_size, opt.weight_decay, opt.threads, who);
  if (opt.min_steps < 0) throw InputError(who + ": min_steps must be >= 0, got " + std::to_string(opt.min_steps));
  auto& train_torch =
      torch_function<decltype(fednode_torch_train_linear_head)>("fednode_torch_train_linear_head");
  TorchThreadsGuard threads(opt.threads);
  return std::unique_ptr<LinearHead>(train_torch(train, opt, on_epoch));
}

std::unique_ptr<AdapterHead> train_adapter_head(const Features& train, const AdapterTrainOptions& opt,
                                                const EpochCallback& on_epoch) {
  const std::string who = "adapter head training";
  check_training_set(train, who);
  check_optimizer_settings(opt.lr, opt.epochs, opt.batch_size, opt.weight_decay, opt.threads, who);
  if (opt.hidden1 < 1 || opt.hidden1 > kMaxHidden || opt.hidden2 < 1 || opt.hidden2 > kMaxHidden)
    throw InputError(who + ": hidden sizes must be in [1, " + std::to_string(kMaxHidden) + "], got " +
                     std::to_string(opt.hidden1) + " and " + std::to_string(opt.hidden2));
  if (opt.min_steps < 0) throw InputError(who + ": min_steps must be >= 0, got " + std::to_string(opt.min_steps));
  if (!(opt.momentum >= 0.0 && opt.momentum < 1.0))
    throw InputError(who + ": momentum must be in [0, 1), got " + std::to_string(opt.momentum));
  auto& train_torch =
      torch_function<decltype(fednode_torch_train_adapter_head)>("fednode_torch_train_adapter_head");
  TorchThreadsGuard threads(opt.threads);
  return std::unique_ptr<AdapterHead>(train_torch(train, opt, on_epoch));
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
