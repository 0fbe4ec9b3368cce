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

namespace {
// A protocol error wrapped as a security error may carry the same tag already ("malformed").
std::string tagged(const std::string& message, SecurityCode c) {
  const std::string tag = " [" + std::string(to_string(c)) + "]";
  const bool has_it = message.size() >= tag.size() && message.compare(message.size() - tag.size(), tag.size(), tag) == 0;
  return has_it ? message : message + tag;
}
}  // namespace

SecurityError::SecurityError(SecurityCode c, const std::string& message) : InputError(tagged(message, c)), code(c) {}

}  // namespace fednode
