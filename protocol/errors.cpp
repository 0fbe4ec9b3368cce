#include "protocol/errors.h"

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

}  // namespace fednode
