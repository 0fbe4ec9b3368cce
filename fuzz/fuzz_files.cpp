// The files a node reads that someone else may have written: feature and label arrays (.npy),
// IDX image and label files (plain or gzip), topology TOML, key files, backbone preprocessing
// sidecars, images (PNG, JPEG), the replay state of a state directory and head files. Which decoder is
// chosen at build time (FUZZ_NPY, FUZZ_IDX, ...), one target each.
#include "fuzz_input.h"

#include "crypto/key_files.h"
#include "crypto/keys.h"
#include "core/digest.h"
#include "crypto/replay.h"
#include "features/idx.h"
#include "features/images.h"
#include "features/npy.h"
#include "features/preprocess.h"
#include "node/head_io.h"
#include "topology/toml_io.h"

#include <vector>

using namespace fednode;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte picks between a decoder's variants (features or labels, ...), so one corpus
  // serves both and a mutation can carry a structure from one to the other.
  const uint8_t variant = size > 0 ? data[0] : 0;
  const uint8_t* body = size > 0 ? data + 1 : data;
  const size_t body_size = size > 0 ? size - 1 : 0;
  fuzz::expect_input_error_or_success([&] {
#if defined(FUZZ_NPY)
    const std::string path = fuzz::write_input_file(body, body_size, ".npy");
    if (variant & 1) (void)read_npy_labels(path);
    else (void)read_npy_features(path);
#elif defined(FUZZ_IDX)
    const std::string path = fuzz::write_input_file(body, body_size, "-idx");
    if (variant & 1) (void)read_idx_labels(path);
    else (void)read_idx_images(path);
#elif defined(FUZZ_TOPOLOGY)
    (void)variant;
    (void)topo::parse_toml(std::string(fuzz::as_view(data, size)), "fuzzed.toml", "/nonexistent-fuzz-dir");
#elif defined(FUZZ_KEYS)
    if (variant % 3 == 0) {
      (void)load_secret_key_file(fuzz::write_input_file(body, body_size, "-node.key", 0600));
    } else if (variant % 3 == 1) {
      (void)load_public_key_file(fuzz::write_input_file(body, body_size, "-node.pub", 0644));
    } else {
      (void)PublicKey::parse(fuzz::as_view(body, body_size), "fuzzed key");
    }
#elif defined(FUZZ_PREPROCESSING)
    (void)variant;
    (void)Preprocessing::parse(std::string(fuzz::as_view(data, size)), "fuzzed.preprocessing");
#elif defined(FUZZ_IMAGE)
    (void)variant;
    (void)decode_image(std::vector<uint8_t>(data, data + size), "fuzzed image");
#elif defined(FUZZ_REPLAY_STATE)
    (void)variant;
    (void)ReplayGuard::deserialize(fuzz::as_view(data, size), "fuzzed replay state");
#elif defined(FUZZ_HEAD_FILE)
    // Variant 1 appends the body's own checksum, so that mutations reach the card and head
    // readers behind it instead of stopping at the checksum.
    std::string bytes(fuzz::as_view(body, body_size));
    if (variant & 1) bytes += sha256_hex(bytes);
    (void)parse_head_file(bytes, "fuzzed head file");
#else
#error "define one FUZZ_ target"
#endif
  });
  return 0;
}
