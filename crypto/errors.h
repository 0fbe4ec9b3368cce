// Why a sealed message was refused. Each reason has its own code so that a node can log and
// count rejections, and so that tests can tell a tampered header from a tampered ciphertext.
#pragma once

#include "core/types.h"

#include <cstdint>
#include <string>

namespace fednode {

enum class SecurityCode : uint16_t {
  Malformed = 1,           // the frame or its header cannot be decoded (see protocol_code)
  UnsupportedVersion = 2,  // the header names a protocol version this node does not speak
  WrongRecipient = 3,      // addressed to another node
  WrongRun = 4,            // belongs to another run of the federation
  UnknownSender = 5,       // the sender is not in this node's allow list (its topology)
  HeaderTampered = 6,      // the header tag does not verify: header altered, or forged
  CiphertextTampered = 7,  // the header is authentic but the ciphertext or nonce was altered
  Replayed = 8,            // authentic, but this msg_id was accepted before or is too old
  MalformedPayload = 9,    // authentic, but the decrypted payload breaks the protocol
  InvalidKey = 10,         // a public key is malformed or a low-order point
};

const char* to_string(SecurityCode code);

struct SecurityError : InputError {
  SecurityError(SecurityCode code, const std::string& message);
  SecurityCode code;
};

}  // namespace fednode
