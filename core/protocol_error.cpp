#include "core/protocol_error.h"

namespace fednode {

const char* to_string(ProtocolErrorCode code) {
  switch (code) {
    case ProtocolErrorCode::Malformed: return "malformed";
    case ProtocolErrorCode::Truncated: return "truncated";
    case ProtocolErrorCode::TrailingBytes: return "trailing-bytes";
    case ProtocolErrorCode::TooLarge: return "too-large";
    case ProtocolErrorCode::WrongType: return "wrong-type";
    case ProtocolErrorCode::MissingField: return "missing-field";
    case ProtocolErrorCode::UnknownField: return "unknown-field";
    case ProtocolErrorCode::UnsupportedVersion: return "unsupported-version";
    case ProtocolErrorCode::UnknownMessageType: return "unknown-message-type";
    case ProtocolErrorCode::NonFinite: return "non-finite";
    case ProtocolErrorCode::DimensionMismatch: return "dimension-mismatch";
    case ProtocolErrorCode::InvalidValue: return "invalid-value";
  }
  return "unknown";
}

ProtocolError::ProtocolError(ProtocolErrorCode c, const std::string& message)
    : InputError(message + " [" + to_string(c) + "]"), code(c) {}

void check_limit(uint64_t value, uint64_t limit, const std::string& path, const char* limit_name) {
  if (value > limit)
    throw ProtocolError(ProtocolErrorCode::TooLarge, path + ": " + std::to_string(value) + " exceeds the limit of " +
                                                         std::to_string(limit) + " (" + limit_name + ")");
}

uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& path) {
  if (a != 0 && b > UINT64_MAX / a) throw ProtocolError(ProtocolErrorCode::TooLarge, path + ": size overflows 64 bits");
  return a * b;
}

}  // namespace fednode
