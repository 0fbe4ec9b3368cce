// A ViT's architecture on the wire (docs/protocol.md, 6.4): shared by FedMITR's model knowledge
// and its heads.
#include "protocol/payload_parts.h"

#include <array>

namespace fednode::wire {
namespace {

constexpr std::array<const char*, 7> kKeys = {"image_size", "channels", "patch", "dim", "depth", "heads", "mlp_dim"};

std::array<int*, 7> fields(VitSpec& s) {
  return {&s.image_size, &s.channels, &s.patch, &s.dim, &s.depth, &s.heads, &s.mlp_dim};
}

}  // namespace

void pack_vit_spec(Packer& pk, const VitSpec& spec) {
  VitSpec s = spec;
  pk.pack_map(static_cast<uint32_t>(kKeys.size()));
  const auto values = fields(s);
  for (size_t j = 0; j < kKeys.size(); ++j) {
    pack_str(pk, kKeys[j]);
    pk.pack_uint32(static_cast<uint32_t>(*values[j]));
  }
}

VitSpec read_vit_spec(const msgpack::object& o, const std::string& path, int classes) {
  MapReader m(o, path);
  VitSpec s;
  const auto values = fields(s);
  for (size_t j = 0; j < kKeys.size(); ++j) {
    const uint64_t v = m.uint(kKeys[j]);
    if (v > (uint64_t{1} << 30)) throw ProtocolError(ProtocolErrorCode::TooLarge, m.path(kKeys[j]) + ": " + std::to_string(v));
    *values[j] = static_cast<int>(v);
  }
  m.finish();
  s.classes = classes;
  try {
    s.validate(path);
  } catch (const ProtocolError&) {
    throw;
  } catch (const InputError& e) {
    throw ProtocolError(ProtocolErrorCode::InvalidValue, e.what());
  }
  return s;
}

}  // namespace fednode::wire
