// The head trainers of libfednode_torch.so (core/torch_library.h), which train.cpp calls after
// checking their arguments and setting LibTorch's threads. Internal to the library: not installed.
#pragma once

#include "methods/heads/train.h"
#include "methods/heads/train_common.h"
#include "core/torch_library.h"

// Both train with `lr` (the options' own is ignored) and return a head the caller owns; with a
// watch, the model is scored on its validation set after every epoch and training stops when
// the watch says so.
FEDNODE_TORCH_EXPORT fednode::LinearHead* fednode_torch_train_linear_head(
    const fednode::Features& train, const fednode::LinearTrainOptions& opt, double lr,
    const fednode::EpochCallback& on_epoch, fednode::ValidationWatch* watch);
FEDNODE_TORCH_EXPORT fednode::AdapterHead* fednode_torch_train_adapter_head(
    const fednode::Features& train, const fednode::AdapterTrainOptions& opt, double lr,
    const fednode::EpochCallback& on_epoch, fednode::ValidationWatch* watch);
// X's columns match head.dim().
FEDNODE_TORCH_EXPORT fednode::MatrixF fednode_torch_adapter_scores(const fednode::AdapterHead& head,
                                                                   const fednode::MatrixF& X);
