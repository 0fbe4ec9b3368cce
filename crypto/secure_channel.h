// What a node uses to talk: seal a protocol message for one peer, and open what arrives, with
// every check of docs/protocol.md ("Opening a frame") in its order. Builds on protocol/ (the
// envelope header that sealing binds) and crypto/seal.h.
#pragma once

#include "crypto/errors.h"
#include "crypto/keys.h"
#include "crypto/replay.h"
#include "crypto/seal.h"
#include "protocol/codec.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace fednode {

// The allow list: every node this node may exchange messages with, and its public key. It comes
// from the topology; a node not in it cannot get a message accepted.
using PeerKeys = std::map<NodeId, PublicKey>;

// A deterministic run id from a name (e.g. the topology's run name): BLAKE2b-128 of
// "fednode/1 run id" || name. Every node of a run must use the same one, and a new run must
// use a new one (docs/security.md, "Replays across runs").
RunId derive_run_id(std::string_view name);
RunId random_run_id();
// "run-" and 16 random hex digits (64 bits from libsodium's CSPRNG): a fresh run name for a new
// topology file. Not drawn from core/rng.h: it must differ between runs, not reproduce.
std::string random_run_name();

struct RejectedMessage : SecurityError {
  RejectedMessage(SecurityCode code, const std::string& message);
  std::optional<EnvelopeHeader> header;          // set once the header decoded
  bool authenticated = false;                    // header proven to come from header->from
  std::optional<ProtocolErrorCode> protocol_code;  // for Malformed and MalformedPayload
};

// seal() and open() only read the channel, so threads may share one; the ReplayGuard passed to
// open() is the caller's to serialise access to.
class SecureChannel {
 public:
  // `peers` may include this node itself (as a topology would); its key must then match
  // `identity`. Throws InputError for a mismatch and SecurityError(InvalidKey) for a peer key
  // that is a low-order point. Key agreement with every peer happens here, once.
  SecureChannel(Identity identity, NodeId self, RunId run, const PeerKeys& peers, Limits limits = {});

  NodeId id() const { return self_; }
  const PublicKey& public_key() const { return identity_.public_key(); }
  const RunId& run() const { return run_; }
  const Limits& limits() const { return limits_; }
  bool knows(NodeId peer) const { return peers_.count(peer) != 0; }

  // One frame for `to`, carrying `payload` as message `msg_id` (>= 1, strictly increasing over
  // everything this node sends in this run, across restarts). Throws InputError for an unknown
  // recipient and ProtocolError for a payload that cannot be encoded. A Knowledge payload goes as
  // knowledge; the overload below also sends it as complete.
  std::string seal(NodeId to, uint64_t msg_id, const Payload& payload, const EncodeOptions& options = {}) const;
  // The same for knowledge held outside a Payload, without copying its tensors. `type` is
  // Knowledge, or Complete for the ring's second pass (same payload, so only the header differs);
  // any other type is an InputError.
  std::string seal(NodeId to, uint64_t msg_id, const Knowledge& knowledge, const EncodeOptions& options = {},
                   MessageType type = MessageType::Knowledge) const;

  // Opens one frame. On success the message's id is recorded in `replay`; on any failure
  // nothing is recorded and RejectedMessage says why. An authentic duplicate (Replayed with
  // authenticated = true) is what a peer whose acknowledgement was lost sends again: answer it
  // with another Ack, and use nothing from it.
  // `plaintext`, when given, receives the payload's bytes as decrypted: what a node stores, so
  // that it need not encode the decoded payload again.
  Message open(std::string_view frame, ReplayGuard& replay, std::string* plaintext = nullptr) const;
  // The same, decrypting in the frame's own memory: no second copy of a multi-megabyte message.
  // `plaintext`, when given, is set to the decrypted payload inside the frame. The frame's
  // ciphertext is overwritten (wiped, if it does not authenticate) once the header checks pass.
  Message open_in_place(char* frame, size_t size, ReplayGuard& replay, std::string_view* plaintext = nullptr) const;

 private:
  using Decrypt = std::function<std::string_view(const MessageKeys&, std::string_view header, const SealedView&)>;
  Message open_with(std::string_view frame, ReplayGuard& replay, const Decrypt& decrypt) const;
  std::string seal_plaintext(NodeId to, uint64_t msg_id, MessageType type, const std::string& plaintext) const;
  EnvelopeHeader make_header(NodeId to, uint64_t msg_id, MessageType type) const;

  struct Peer {
    PublicKey key;
    MessageKeys send;
    MessageKeys receive;
  };
  Identity identity_;
  NodeId self_;
  RunId run_;
  Limits limits_;
  std::map<NodeId, Peer> peers_;
};

}  // namespace fednode
