// FedCGS (Guan et al., AAAI 2025): nodes share additive feature statistics (stats.h) and fit the
// closed-form Gaussian / LDA head (lda.h). docs/methods/fedcgs.md explains the choices.
#pragma once

#include "methods/fedcgs/lda.h"
#include "methods/fedcgs/stats.h"
#include "methods/method.h"

#include <memory>

namespace fednode {

// Throws InputError for options out of range (shrinkage outside [0, 1]).
std::unique_ptr<Method> make_fedcgs(const FedCgsOptions& options);
// Its entry in methods/registry.h.
struct MethodDescriptor;
MethodDescriptor fedcgs_descriptor();

}  // namespace fednode
