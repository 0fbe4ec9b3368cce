// The ViT forward pass of libfednode_torch.so (core/torch_library.h), which vit.cpp calls after
// checking its arguments. Internal to the library: not installed.
#pragma once

#include "core/torch_library.h"
#include "methods/fedmitr/vit.h"

// Loads the TorchScript ViT at `path` (its SHA-256 `digest`, computed by the caller) into the
// process's table of scripted ViTs and fills `spec` (classes included). Throws InputError.
FEDNODE_TORCH_EXPORT void fednode_torch_vit_load_script(const std::string& path, const std::string& digest,
                                                        fednode::VitSpec* spec);
// The TorchScript file's bytes of `model` (the built-in architecture) in the script interface, its
// parameters the file's. Throws InputError for a scripted model.
FEDNODE_TORCH_EXPORT void fednode_torch_vit_write_script(const fednode::VitModel& model, std::string* bytes);
// The parameters of a loaded script's file, flat in named_parameters() order.
FEDNODE_TORCH_EXPORT void fednode_torch_vit_script_start(const std::string& digest, std::vector<float>* out);
// `keep`: empty, or B * tokens flags; without `token_logits`, out->token_logits stays empty (vit.h,
// vit_class_scores). Fills `out`; throws std::exception on a LibTorch failure.
FEDNODE_TORCH_EXPORT void fednode_torch_vit_forward(const fednode::VitModel& model, const fednode::MatrixF& images,
                                                    const std::vector<uint8_t>& keep, bool drop_stopped,
                                                    bool token_logits, fednode::VitOutput* out);
// Trains from `start` on `images` with `labels` (checked by vit.cpp); fills `out`. Throws
// InputError when training diverges.
FEDNODE_TORCH_EXPORT void fednode_torch_vit_train(const fednode::VitModel& start, const fednode::MatrixF& images,
                                                  const fednode::Labels& labels, const fednode::VitTrainOptions& options,
                                                  fednode::VitModel* out);
// Inverts the ensemble (checked by vit.cpp), its models weighted by `shares`, mixing
// probabilities or logits; `noise` is the starting images. Fills `out`.
FEDNODE_TORCH_EXPORT void fednode_torch_vit_invert(const std::vector<fednode::VitModel>& ensemble,
                                                   const fednode::VitModel* student, const fednode::Labels& targets,
                                                   const fednode::InversionOptions& options,
                                                   const std::vector<double>& shares, bool probabilities,
                                                   const fednode::MatrixF& noise, fednode::Inversion* out);
// Distils `targets` into `student` (checked by vit.cpp); fills `out`. Throws InputError when
// training diverges.
FEDNODE_TORCH_EXPORT void fednode_torch_vit_distill(const fednode::VitModel& student, const fednode::MatrixF& images,
                                                    const fednode::DistillTargets& targets,
                                                    const fednode::DistillOptions& options, fednode::VitModel* out);
// The same loss on all the images, without training.
FEDNODE_TORCH_EXPORT void fednode_torch_vit_distill_loss(const fednode::VitModel& student, const fednode::MatrixF& images,
                                                         const fednode::DistillTargets& targets,
                                                         const fednode::DistillOptions& options, double* out);
