// The one error type of the wire format. Every way bytes from the network can be wrong maps to a
// code, so that a node can log it, count it and answer with an error message without parsing text.
#pragma once

#include "core/types.h"

#include <cstdint>
#include <string>

namespace fednode {

enum class ProtocolErrorCode : uint16_t {
  Malformed = 1,           // not MessagePack, or not the structure the schema describes
  Truncated = 2,           // input ends inside a value
  TrailingBytes = 3,       // bytes after the one top-level value
  TooLarge = 4,            // a size, count, dimension or nesting depth exceeds Limits
  WrongType = 5,           // a field holds another MessagePack type than the schema says
  MissingField = 6,
  UnknownField = 7,        // v1 decoders are strict: new fields mean a new protocol version
  UnsupportedVersion = 8,
  UnknownMessageType = 9,
  NonFinite = 10,          // NaN or Inf in a tensor
  DimensionMismatch = 11,  // shapes disagree with each other or with the declared dim/classes
  InvalidValue = 12,       // out of range, unsorted, duplicate, inconsistent
};

const char* to_string(ProtocolErrorCode code);

struct ProtocolError : InputError {
  ProtocolError(ProtocolErrorCode code, const std::string& message);
  ProtocolErrorCode code;
};

// Throws TooLarge naming the limit when value > limit.
void check_limit(uint64_t value, uint64_t limit, const std::string& path, const char* limit_name);
// a * b, throwing TooLarge instead of wrapping.
uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& path);

}  // namespace fednode
