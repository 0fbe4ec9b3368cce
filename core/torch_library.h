// fednode's LibTorch code -- backbones (features/backbone_torch.cpp) and head training
// (methods/heads/*_torch.cpp) -- is built as a library of its own, libfednode_torch.so, and loaded
// the first time something needs it. A process that never runs a backbone or trains a LibTorch
// head (a FedCGS hub, a leaf on pixels with an LDA head) never loads LibTorch, whose start-up
// alone took 0.8 s and 160 MB of resident memory per process (docs/performance.md).
//
// The library is looked for, in this order: the file FEDNODE_TORCH_LIBRARY names; next to the
// running executable (a build tree's fednode); in <executable>/../<libdir>/fednode/ (an installed,
// possibly moved, fednode); next to the shared object holding this code (the Python module, whose
// installation puts a copy there); in this build tree; in the installation's libdir/fednode/. Each
// candidate must come from the same build as the code loading it (fednode_torch_abi), so that a
// stale copy is passed over instead of being called with another build's types.
#pragma once

#include <string>

namespace fednode {

// The address of `symbol` in libfednode_torch.so, loading it first if needed. Throws
// std::runtime_error naming every place looked in and why each failed.
void* torch_library_symbol(const char* symbol);

// One of the library's entry points, typed by its declaration (extern "C", in a header of the
// folder that owns it): torch_function<decltype(fednode_torch_x)>("fednode_torch_x").
template <typename Function>
Function& torch_function(const char* symbol) {
  return *reinterpret_cast<Function*>(torch_library_symbol(symbol));
}

// Whether this process has loaded the library (it is never unloaded).
bool torch_library_loaded();
// The file it was loaded from; empty while not loaded.
std::string torch_library_path();

// LibTorch's intra-op thread count (loads the library). Both first make LibTorch start from
// OpenMP's default (core/openmp_threads.h) instead of its own.
int torch_threads();
void set_torch_threads(int threads);

}  // namespace fednode

// Marks a library entry point: everything else in libfednode_torch.so is hidden, so that its own
// copy of the folder libraries it was linked with never stands in for the executable's.
#define FEDNODE_TORCH_EXPORT extern "C" __attribute__((visibility("default")))

// The entry points core/ itself calls, defined in core/torch_threads_torch.cpp.
extern "C" {
// FEDNODE_TORCH_ABI as the library was compiled: the build it belongs to.
const char* fednode_torch_abi();
int fednode_torch_get_num_threads();
void fednode_torch_set_num_threads(int threads);
}
