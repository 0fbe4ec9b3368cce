// Bounds on everything a peer can make a node allocate. Each is checked before the memory it
// guards is allocated: the message length before parsing, MessagePack container and string
// lengths while parsing, dimensions and counts before any Eigen matrix is sized.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fednode {

struct Limits {
  uint64_t max_message_bytes = uint64_t{256} << 20;  // a whole frame, and so any payload
  uint32_t max_dim = 16384;            // feature dimension and head layer widths
  uint32_t max_classes = 100000;
  uint32_t max_components = 4096;     // Gaussian components per class (FedPFT K)
  uint32_t max_prototypes = 65536;     // prototypes per class (FedTC)
  uint32_t max_contributors = 65536;   // node ids in one contributor set
  // Samples one piece of knowledge may claim to summarise, all classes together. FedPFT draws
  // that many synthetic features, so this bounds what merging a piece allocates (2^20 samples
  // of d = 1280 are 5 GiB of float32); the largest public image sets have about 2^20 per class
  // and node.
  uint64_t max_samples = uint64_t{1} << 20;
  uint32_t max_string_bytes = 1024;    // any string field: method, backbone fingerprint, reason
  uint32_t max_depth = 8;              // MessagePack nesting; the v1 schema needs 6
  uint64_t max_items = uint64_t{1} << 22;  // MessagePack values in one message, all levels

  // Throws InputError if a limit is zero, too small for valid v1 messages, or so large that
  // size arithmetic could overflow.
  void validate() const;
};

// The limits by the names docs/protocol.md section 8 and a topology's [federation.limits] use
// ("max_message_bytes", ...).
std::vector<std::string> limit_names();
// Sets the limit called `name`; throws InputError, listing the names, for one that is not a limit.
// The value is checked by Limits::validate, with the others.
void set_limit(Limits& limits, const std::string& name, uint64_t value);

}  // namespace fednode
