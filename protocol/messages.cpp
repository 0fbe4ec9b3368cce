#include "protocol/messages.h"

#include <msgpack/version.hpp>

namespace fednode {

const char* msgpack_version_text() { return msgpack_version(); }

const char* to_string(MessageType t) {
  switch (t) {
    case MessageType::Hello: return "hello";
    case MessageType::Knowledge: return "knowledge";
    case MessageType::Head: return "head";
    case MessageType::Ack: return "ack";
    case MessageType::Error: return "error";
    case MessageType::Complete: return "complete";
    case MessageType::UnmaskRequest: return "unmask request";
    case MessageType::UnmaskReply: return "unmask reply";
  }
  return "unknown";
}

const char* to_string(ErrorReason r) {
  switch (r) {
    case ErrorReason::Malformed: return "malformed";
    case ErrorReason::Incompatible: return "incompatible";
    case ErrorReason::UnsupportedVersion: return "unsupported-version";
    case ErrorReason::Rejected: return "rejected";
    case ErrorReason::Busy: return "busy";
    case ErrorReason::Shutdown: return "shutdown";
    case ErrorReason::Timeout: return "timeout";
    case ErrorReason::Internal: return "internal";
  }
  return "unknown";
}

MessageType type_of(const Payload& p) {
  switch (p.index()) {
    case 0: return MessageType::Hello;
    case 1: return MessageType::Knowledge;
    case 2: return MessageType::Head;
    case 3: return MessageType::Ack;
    case 4: return MessageType::Error;
    case 5: return MessageType::UnmaskRequest;
    default: return MessageType::UnmaskReply;
  }
}

}  // namespace fednode
