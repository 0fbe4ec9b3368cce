#pragma once

#include "methods/method.h"

#include <memory>

namespace fednode {

std::unique_ptr<Method> make_fedtc(const FedTcOptions& options);
// Its entry in methods/registry.h.
struct MethodDescriptor;
MethodDescriptor fedtc_descriptor();

}  // namespace fednode
