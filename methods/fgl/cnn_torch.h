// FGL's CNN in libfednode_torch.so (core/torch_library.h), which cnn.cpp calls after checking its
// arguments. Internal to the library: not installed.
#pragma once

#include "core/torch_library.h"
#include "methods/fgl/cnn.h"

FEDNODE_TORCH_EXPORT void fednode_torch_cnn_train(const fednode::CnnModel& start, const fednode::MatrixF& images,
                                                  const fednode::Labels& labels, const fednode::CnnTrainOptions& options,
                                                  fednode::CnnModel* out);
FEDNODE_TORCH_EXPORT void fednode_torch_cnn_scores(const fednode::CnnModel& model, const fednode::MatrixF& images,
                                                   fednode::MatrixF* out);
