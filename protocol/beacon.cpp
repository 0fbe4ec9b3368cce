#include "protocol/beacon.h"

#include <cstring>

namespace fednode {
namespace {

// Layout, all integers big-endian: magic "FNDB" | version | reserved 0 | port u16 | node u32 |
// run tag 8 | public key 32.
constexpr char kMagic[4] = {'F', 'N', 'D', 'B'};
constexpr size_t kVersionAt = 4, kReservedAt = 5, kPortAt = 6, kNodeAt = 8, kRunAt = 12, kKeyAt = 20;
static_assert(kKeyAt + 32 == kBeaconBytes);

}  // namespace

std::string encode_beacon(const Beacon& b) {
  std::string out(kBeaconBytes, '\0');
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  out[kVersionAt] = static_cast<char>(kBeaconVersion);
  out[kPortAt] = static_cast<char>(b.port >> 8);
  out[kPortAt + 1] = static_cast<char>(b.port & 0xff);
  for (int i = 0; i < 4; ++i) out[kNodeAt + i] = static_cast<char>((b.node >> (24 - 8 * i)) & 0xff);
  std::memcpy(out.data() + kRunAt, b.run.data(), b.run.size());
  std::memcpy(out.data() + kKeyAt, b.key.data(), b.key.size());
  return out;
}

std::optional<Beacon> decode_beacon(std::string_view bytes, std::string* why) {
  const auto refuse = [&](const char* reason) -> std::optional<Beacon> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (bytes.size() != kBeaconBytes) return refuse("not 52 bytes long");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return refuse("no FNDB magic");
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  if (byte(kVersionAt) != kBeaconVersion) return refuse("an unknown beacon version");
  if (byte(kReservedAt) != 0) return refuse("a reserved byte that is not 0");
  Beacon b;
  b.port = static_cast<uint16_t>(byte(kPortAt) << 8 | byte(kPortAt + 1));
  if (b.port == 0) return refuse("port 0");
  for (int i = 0; i < 4; ++i) b.node = b.node << 8 | byte(kNodeAt + i);
  std::memcpy(b.run.data(), bytes.data() + kRunAt, b.run.size());
  std::memcpy(b.key.data(), bytes.data() + kKeyAt, b.key.size());
  return b;
}

}  // namespace fednode
