#include "crypto/errors.h"

namespace fednode {

const char* to_string(SecurityCode code) {
  switch (code) {
    case SecurityCode::Malformed: return "malformed";
    case SecurityCode::UnsupportedVersion: return "unsupported-version";
    case SecurityCode::WrongRecipient: return "wrong-recipient";
    case SecurityCode::WrongRun: return "wrong-run";
    case SecurityCode::UnknownSender: return "unknown-sender";
    case SecurityCode::HeaderTampered: return "header-tampered";
    case SecurityCode::CiphertextTampered: return "ciphertext-tampered";
    case SecurityCode::Replayed: return "replayed";
    case SecurityCode::MalformedPayload: return "malformed-payload";
    case SecurityCode::InvalidKey: return "invalid-key";
  }
  return "unknown";
}

SecurityError::SecurityError(SecurityCode c, const std::string& message)
    : InputError(message + " [" + to_string(c) + "]"), code(c) {}

}  // namespace fednode
