#include "protocol/limits.h"

#include "core/types.h"

#include <string>

namespace fednode {
namespace {
// Hard ceilings keep every size product of the decoders within 64 bits (e.g. K * d * d for
// full covariances is at most 2^20 * 2^40) and binaries within MessagePack's 32-bit lengths.
void check(uint64_t value, uint64_t low, uint64_t high, const char* name) {
  if (value < low || value > high)
    throw InputError(std::string("protocol limit ") + name + " = " + std::to_string(value) +
                     " must lie in [" + std::to_string(low) + ", " + std::to_string(high) + "]");
}
}  // namespace

void Limits::validate() const {
  check(max_message_bytes, 1024, UINT32_MAX, "max_message_bytes");
  check(max_dim, 1, uint64_t{1} << 20, "max_dim");
  check(max_classes, 1, uint64_t{1} << 24, "max_classes");
  check(max_components, 1, uint64_t{1} << 20, "max_components");
  check(max_prototypes, 1, uint64_t{1} << 24, "max_prototypes");
  check(max_contributors, 1, uint64_t{1} << 24, "max_contributors");
  check(max_samples, 1, uint64_t{1} << 40, "max_samples");
  check(max_string_bytes, 16, uint64_t{1} << 20, "max_string_bytes");
  check(max_depth, 6, 64, "max_depth");
  check(max_items, 64, UINT32_MAX, "max_items");
}

}  // namespace fednode
