// The sealed-frame opener (docs/protocol.md, section 7, steps 1-5), as a node runs it on what its
// socket hands over: node 1 of a two-node federation opens the bytes, and what opens is decoded.
// The seeds are frames node 0 really sealed, so mutations reach the header checks in front of
// the AEAD; past it, only what node 0 sealed opens (the payload targets cover the decoders).
#include "fuzz_input.h"
#include "node/secure_channel.h"
#include "node/secure_stream.h"

#include <array>
#include <variant>
#include <vector>

using namespace fednode;

namespace {

const SecureChannel& receiver() {
  static const SecureChannel channel = [] {
    std::array<uint8_t, 32> seed0{}, seed1{};
    seed0.fill(0x11);
    seed1.fill(0x22);
    const Identity node0 = Identity::from_seed(seed0);
    Identity node1 = Identity::from_seed(seed1);
    RunId run;
    for (size_t i = 0; i < run.bytes.size(); ++i) run.bytes[i] = static_cast<uint8_t>(0xA0 + i);
    const PeerKeys peers{{0, node0.public_key()}, {1, node1.public_key()}};
    return SecureChannel(std::move(node1), 1, run, peers);
  }();
  return channel;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // open_head decrypts in place: it needs the frame in memory of its own.
  std::vector<char> frame(data, data + size);
  const ReplayGuard replay;
  fuzz::expect_input_error_or_success([&] {
    auto opened = receiver().open_head(frame.data(), frame.size(), replay);
    if (auto* first = std::get_if<OpenedFrame>(&opened)) (void)decode_opened(*first, receiver().limits());
  });
  return 0;
}
