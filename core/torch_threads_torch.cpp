// Part of libfednode_torch.so (core/torch_library.h): LibTorch's thread settings for core/.
#include "core/torch_library.h"

// Only the thread-pool API: far cheaper to compile than <torch/torch.h>.
#include <ATen/Parallel.h>

FEDNODE_TORCH_EXPORT const char* fednode_torch_abi() { return FEDNODE_TORCH_ABI; }
FEDNODE_TORCH_EXPORT int fednode_torch_get_num_threads() { return at::get_num_threads(); }
FEDNODE_TORCH_EXPORT void fednode_torch_set_num_threads(int threads) { at::set_num_threads(threads); }
