#pragma once

#include "methods/method.h"

#include <memory>

namespace fednode {

std::unique_ptr<Method> make_fedpft(const FedPftOptions& options);
// Its entry in methods/registry.h.
struct MethodDescriptor;
MethodDescriptor fedpft_descriptor();

}  // namespace fednode
