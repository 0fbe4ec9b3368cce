// The clear-text envelope a stranger reaches first (docs/protocol.md, sections 3, 12 and 13): the
// frame's outer array, the header inside it, a version-2 chunk message, and a discovery beacon.
// Which one is chosen at build time (FUZZ_FRAME, FUZZ_HEADER, FUZZ_CHUNK, FUZZ_BEACON), one
// target each.
#include "fuzz_input.h"
#include "protocol/beacon.h"
#include "protocol/codec.h"

#include <cstdlib>

using namespace fednode;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Limits limits;
  const std::string_view bytes = fuzz::as_view(data, size);
  fuzz::expect_input_error_or_success([&] {
#if defined(FUZZ_FRAME)
    const FrameView frame = decode_frame(bytes, limits);
    (void)decode_header(frame.header, limits);
#elif defined(FUZZ_HEADER)
    const EnvelopeHeader header = decode_header(bytes, limits);
    if (header.stream) check_stream_layout(*header.stream, limits, "fuzzed header");
#elif defined(FUZZ_CHUNK)
    if (is_chunk_message(bytes)) (void)decode_chunk(bytes, limits);
#elif defined(FUZZ_BEACON)
    std::string why;
    // What decodes must encode to the very same bytes: the layout has no slack.
    if (const auto beacon = decode_beacon(bytes, &why)) {
      if (encode_beacon(*beacon) != bytes) std::abort();
    } else if (why.empty()) {
      std::abort();  // a refusal always says why
    }
#else
#error "define FUZZ_FRAME, FUZZ_HEADER, FUZZ_CHUNK or FUZZ_BEACON"
#endif
  });
  return 0;
}
