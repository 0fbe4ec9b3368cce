// What arrives at a networked node, from socket to machine (docs/node.md, "Receiving"): open the
// frame (node/secure_channel.h), decode its payload, ask the machine whether its plan takes it,
// store it, acknowledge it, and hand it to the machine. A restarted node gives the machine what
// its state directory holds through the same decode and the same check.
//
// Acknowledgements and error replies settle frames in the Outbox; every other answer (an ack,
// an error) is sealed and sent back here, on the connection the frame came in on.
#pragma once

#include "node/machine.h"
#include "node/outbox.h"
#include "node/secure_channel.h"
#include "node/state_store.h"
#include "node/transport.h"

#include <chrono>
#include <string>

namespace fednode {

// What the inbox counted, for the node's result.
struct InboxTally {
  int64_t bytes_received = 0;     // frames, as they arrived
  int64_t bytes_answered = 0;     // acks and error replies sent
  int64_t messages_received = 0;  // accepted (duplicates included)
  int64_t frames_rejected = 0;    // failed the opening checks or the plan
  int64_t duplicates = 0;         // authentic repeats: acknowledged, not used
};

class Inbox {
 public:
  // Every reference must outlive the inbox. The replay guard is loaded from `store`; `say` logs,
  // naming peers by `who`.
  Inbox(const SecureChannel& channel, StateStore& store, Transport& transport, Outbox& outbox, Machine& machine,
        Outbox::Say say, Outbox::Who who);

  // A restart: every message the state directory held (StateStore::received), decoded and
  // checked again (what a node accepted under older checks or limits may not pass now), goes to
  // the machine unannounced.
  Actions restore(std::vector<StoredMessage> stored, double now);
  // One frame from the transport, opened where it lies (its bytes are plaintext afterwards).
  Actions handle(Incoming& in, double now);
  // The line saying how many rejections went unlogged, if any (before the node reports).
  void say_rejections_left_out();

  const InboxTally& tally() const { return tally_; }
  // When the last frame came (the closing node waits for a quiet moment).
  std::chrono::steady_clock::time_point last_frame() const { return last_frame_; }

 private:
  // Steps 1-4 failed: answer an authentic duplicate with another ack, count the rest.
  void rejected(const Incoming& in, const RejectedMessage& e);
  // An Ack or Error settles a frame in the outbox.
  void settle(const Message& msg);
  // Step 5, and the plan's check: empty when the machine takes the message, else why not.
  std::string decode_and_check(const EnvelopeHeader& h, std::string_view plaintext, Payload& payload) const;
  void send_ack(const Incoming& in, NodeId to, uint64_t acked);
  void send_error(const Incoming& in, NodeId to, ErrorReason reason, uint64_t ref, bool abort, const std::string& text);
  void answer(const Incoming& in, NodeId to, const Payload& p);
  // At most kRejectionLines lines per kRejectionWindow, then one line saying how many were left out:
  // a flood of bad frames must not flood the log as well.
  void say_rejection(const std::string& line);

  const SecureChannel& channel_;
  StateStore& store_;
  Transport& transport_;
  Outbox& outbox_;
  Machine& machine_;
  Outbox::Say say_;
  Outbox::Who who_;
  ReplayGuard replay_;
  InboxTally tally_;
  std::chrono::steady_clock::time_point last_frame_{};
  std::chrono::steady_clock::time_point rejection_window_{};
  int rejections_said_ = 0;
  int64_t rejections_unsaid_ = 0;
};

}  // namespace fednode
