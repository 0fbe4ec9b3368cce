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
  pk.pack_map(static_cast<uint32_t>(kKeys.size() + (s.scripted() ? 2 : 0)));
  const auto values = fields(s);
  for (size_t j = 0; j < kKeys.size(); ++j) {
    pack_str(pk, kKeys[j]);
    pk.pack_uint32(static_cast<uint32_t>(*values[j]));
  }
  if (s.scripted()) {  // a user's TorchScript ViT: which file, and how many parameters it has
    pack_str(pk, "script");
    pack_str(pk, s.script);
    pack_str(pk, "parameters");
    pk.pack_uint64(static_cast<uint64_t>(s.script_parameters));
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
  if (m.find("script")) {
    const std::string_view digest = m.str("script");
    if (digest.size() > 64) throw ProtocolError(ProtocolErrorCode::TooLarge, m.path("script") + ": " + std::to_string(digest.size()) + " bytes");
    s.script.assign(digest.data(), digest.size());
    const uint64_t n = m.uint("parameters");
    if (n > static_cast<uint64_t>(kMaxVitParameters))
      throw ProtocolError(ProtocolErrorCode::TooLarge, m.path("parameters") + ": " + std::to_string(n));
    s.script_parameters = static_cast<int64_t>(n);
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
