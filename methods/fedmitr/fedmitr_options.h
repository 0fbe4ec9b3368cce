// FedMITR's options (MethodOptions's own, methods/method.h): the clients' ViT and its training,
// the half-precision transfer, and the receivers' distillation.
#pragma once

#include "methods/fedmitr/receiver.h"
#include "methods/fedmitr/vit.h"
#include "methods/method.h"

#include <memory>
#include <string>

namespace fednode {

// FedMITR (methods/fedmitr/, docs/methods/fedmitr.md): clients train a ViT from the federation's
// shared initialisation and send it; receivers distil the ensemble of what they hold.
struct FedMitrOptions final : OwnOptions {
  static constexpr const char* kMethod = "fedmitr";
  // image_size and classes come from the data: features of dimension channels * s * s are s x s
  // images.
  VitSpec vit;
  std::string vit_script;          // a user's TorchScript ViT instead of `vit` (vit.h, load_vit_script)
  // seed: per node, from the run's seed. At least 600 steps: on a validation split (alpha 0.1),
  // clients of 2-3 k images learnt nothing in 3 epochs (docs/methods/fedmitr.md).
  VitTrainOptions client = [] {
    VitTrainOptions o;
    o.min_steps = 600;
    return o;
  }();
  bool half_precision = false;     // send the parameters as float16 (rounded where they are made)
  ReceiverOptions receiver;        // seeds: per node, from the run's seed

  std::unique_ptr<OwnOptions> clone() const override { return std::make_unique<FedMitrOptions>(*this); }
};

}  // namespace fednode
