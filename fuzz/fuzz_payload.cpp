// One payload kind's decoder (docs/protocol.md, section 5), as a node applies it after a frame
// authenticated: the bytes are the decrypted plaintext, the header says the type. FUZZ_TYPE is
// the MessageType's number, one target per kind, so that each corpus stays about one schema.
#include "fuzz_input.h"
#include "protocol/codec.h"

#include <optional>

using namespace fednode;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  EnvelopeHeader header;
  header.type = static_cast<MessageType>(FUZZ_TYPE);
  header.from = 3;
  header.to = 5;
  header.msg_id = 7;
  const Limits limits;
  std::optional<Payload> payload;
  fuzz::expect_input_error_or_success([&] { payload = decode_payload(header, fuzz::as_view(data, size), limits); });
  // What decoded must encode again, outside the catch: a decoder that lets through what the
  // encoder refuses would hand the node a value nothing else expects.
  if (payload) (void)encode_payload(*payload);
  return 0;
}
