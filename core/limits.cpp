#include "core/limits.h"

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

template <typename Field>
void assign(Field& field, uint64_t value) {
  // A value beyond the field's type would wrap; saturating keeps validate's message about it true.
  field = value > static_cast<uint64_t>(static_cast<Field>(-1)) ? static_cast<Field>(-1) : static_cast<Field>(value);
}
}  // namespace

std::vector<std::string> limit_names() {
  return {"max_message_bytes", "max_dim",          "max_classes",      "max_components", "max_prototypes",
          "max_contributors",  "max_samples",      "max_string_bytes", "max_depth",      "max_items"};
}

void set_limit(Limits& l, const std::string& name, uint64_t value) {
  if (name == "max_message_bytes") assign(l.max_message_bytes, value);
  else if (name == "max_dim") assign(l.max_dim, value);
  else if (name == "max_classes") assign(l.max_classes, value);
  else if (name == "max_components") assign(l.max_components, value);
  else if (name == "max_prototypes") assign(l.max_prototypes, value);
  else if (name == "max_contributors") assign(l.max_contributors, value);
  else if (name == "max_samples") assign(l.max_samples, value);
  else if (name == "max_string_bytes") assign(l.max_string_bytes, value);
  else if (name == "max_depth") assign(l.max_depth, value);
  else if (name == "max_items") assign(l.max_items, value);
  else {
    std::string known;
    for (const auto& n : limit_names()) known += (known.empty() ? "" : ", ") + n;
    throw InputError("'" + name + "' is not a protocol limit (the limits: " + known + ")");
  }
}

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
