// The paper's Table III beside FedMITR, computed by `fednode simulate` (the report's
// method_baselines): one-shot FedAvg, the ensemble, dense inversion + KD, sparse inversion +
// pseudo-labels, each node's own model and the centralised ViT. The registry entry's `baselines`.
#pragma once

#include "methods/registry.h"

namespace fednode {

MethodBaselines fedmitr_baselines(const Features& all, const std::vector<Features>& local, const Features& test,
                                  const MethodOptions& m, uint64_t seed,
                                  const std::function<void(const std::string&)>& progress);

}  // namespace fednode
