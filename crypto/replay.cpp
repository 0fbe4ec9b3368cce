#include "crypto/replay.h"

#include "crypto/keys.h"

#include <sodium.h>

#include <cstring>

namespace fednode {
namespace {

constexpr char kMagic[4] = {'F', 'N', 'R', 'G'};
constexpr uint8_t kFormatVersion = 1;
constexpr size_t kBitmapBytes = ReplayGuard::kWindow / 8;
constexpr size_t kEntryBytes = 4 + 8 + kBitmapBytes;
constexpr size_t kPrefixBytes = 4 + 1 + 2 + 4;
constexpr size_t kChecksumBytes = 16;

template <typename U>
void put(std::string& out, U v) {
  for (size_t i = 0; i < sizeof(U); ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

template <typename U>
U get(const char* p) {
  U v = 0;
  for (size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

void checksum(std::string_view data, uint8_t out[kChecksumBytes]) {
  crypto_generichash(out, kChecksumBytes, reinterpret_cast<const uint8_t*>(data.data()), data.size(), nullptr, 0);
}

}  // namespace

const char* to_string(ReplayVerdict v) {
  switch (v) {
    case ReplayVerdict::Fresh: return "fresh";
    case ReplayVerdict::Duplicate: return "duplicate";
    case ReplayVerdict::TooOld: return "too old";
  }
  return "?";
}

ReplayVerdict ReplayGuard::check(NodeId sender, uint64_t msg_id) const {
  if (msg_id == 0) return ReplayVerdict::TooOld;
  const auto it = state_.find(sender);
  if (it == state_.end() || msg_id > it->second.top) return ReplayVerdict::Fresh;
  const uint64_t age = it->second.top - msg_id;
  if (age >= kWindow) return ReplayVerdict::TooOld;
  return it->second.seen[age] ? ReplayVerdict::Duplicate : ReplayVerdict::Fresh;
}

ReplayVerdict ReplayGuard::accept(NodeId sender, uint64_t msg_id) {
  const ReplayVerdict v = check(sender, msg_id);
  if (v != ReplayVerdict::Fresh) return v;
  Window& w = state_[sender];
  if (msg_id > w.top) {
    const uint64_t shift = msg_id - w.top;
    if (shift >= kWindow) w.seen.reset();
    else w.seen <<= static_cast<size_t>(shift);
    w.top = msg_id;
    w.seen[0] = true;
  } else {
    w.seen[w.top - msg_id] = true;
  }
  return v;
}

uint64_t ReplayGuard::highest(NodeId sender) const {
  const auto it = state_.find(sender);
  return it == state_.end() ? 0 : it->second.top;
}

std::string ReplayGuard::serialize() const {
  ensure_sodium();
  std::string out(kMagic, sizeof(kMagic));
  put<uint8_t>(out, kFormatVersion);
  put<uint16_t>(out, static_cast<uint16_t>(kWindow));
  put<uint32_t>(out, static_cast<uint32_t>(state_.size()));
  for (const auto& [sender, w] : state_) {
    put<uint32_t>(out, sender);
    put<uint64_t>(out, w.top);
    for (size_t byte = 0; byte < kBitmapBytes; ++byte) {
      uint8_t b = 0;
      for (size_t bit = 0; bit < 8; ++bit) b |= static_cast<uint8_t>(w.seen[byte * 8 + bit]) << bit;
      out += static_cast<char>(b);
    }
  }
  uint8_t sum[kChecksumBytes];
  checksum(out, sum);
  out.append(reinterpret_cast<const char*>(sum), sizeof(sum));
  return out;
}

ReplayGuard ReplayGuard::deserialize(std::string_view bytes, const std::string& where, size_t max_senders) {
  ensure_sodium();
  if (bytes.size() < kPrefixBytes + kChecksumBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    throw InputError(where + ": not a fednode replay state (bad magic or too short)");
  if (static_cast<uint8_t>(bytes[4]) != kFormatVersion)
    throw InputError(where + ": replay state format " + std::to_string(static_cast<uint8_t>(bytes[4])) +
                     ", this build reads " + std::to_string(kFormatVersion));
  if (get<uint16_t>(bytes.data() + 5) != kWindow)
    throw InputError(where + ": replay state has window " + std::to_string(get<uint16_t>(bytes.data() + 5)) +
                     ", expected " + std::to_string(kWindow));
  const uint32_t count = get<uint32_t>(bytes.data() + 7);
  if (count > max_senders)
    throw InputError(where + ": replay state lists " + std::to_string(count) + " senders, more than " +
                     std::to_string(max_senders));
  const size_t expected = kPrefixBytes + static_cast<size_t>(count) * kEntryBytes + kChecksumBytes;
  if (bytes.size() != expected)
    throw InputError(where + ": replay state of " + std::to_string(bytes.size()) + " bytes, expected " +
                     std::to_string(expected) + " for " + std::to_string(count) + " senders");
  uint8_t sum[kChecksumBytes];
  checksum(bytes.substr(0, bytes.size() - kChecksumBytes), sum);
  if (std::memcmp(sum, bytes.data() + bytes.size() - kChecksumBytes, kChecksumBytes) != 0)
    throw InputError(where + ": replay state is corrupt (checksum mismatch)");
  ReplayGuard guard;
  const char* p = bytes.data() + kPrefixBytes;
  int64_t previous = -1;
  for (uint32_t i = 0; i < count; ++i, p += kEntryBytes) {
    const uint32_t sender = get<uint32_t>(p);
    if (static_cast<int64_t>(sender) <= previous)
      throw InputError(where + ": replay state senders are not strictly increasing");
    previous = sender;
    Window w;
    w.top = get<uint64_t>(p + 4);
    for (size_t bit = 0; bit < kWindow; ++bit)
      w.seen[bit] = (static_cast<unsigned char>(p[12 + bit / 8]) >> (bit % 8)) & 1u;
    if (w.top == 0 || !w.seen[0])
      throw InputError(where + ": replay state entry for sender " + std::to_string(sender) + " is inconsistent");
    guard.state_.emplace(sender, w);
  }
  return guard;
}

}  // namespace fednode
