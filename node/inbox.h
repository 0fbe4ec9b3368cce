// What arrives at a networked node, from socket to machine (docs/node.md, "Receiving"): open the
// frame (node/secure_channel.h), decode its payload, ask the node's admission whether its plan
// takes it, store it, acknowledge it, and hand it on (node/admission.h). A restarted node gives the machine what
// its state directory holds through the same decode and the same check.
//
// Acknowledgements and error replies settle frames in the Outbox; every other answer (an ack,
// an error, a receipt) is sealed and sent back here, on the connection the frame came in on.
//
// Receipts close the acknowledgement window (docs/node.md, "Closing"). A sender that hears an
// ack stores it, then answers with a receipt: an ack naming the ack. Until a message's receipt
// comes, its receiver cannot tell "the sender has my ack on disk" from "the sender was killed
// before storing it, and will resend when it is back"; a finished node therefore keeps answering
// while receipts are outstanding (up to its ack deadline), so that the restarted sender finds it.
// It knows which senders send receipts from their hello (protocol version 3), before the first
// message that needs one: a sender killed before any receipt left it is waited for too.
//
// Pacing (docs/node.md, "Pacing"): a sender sends nothing after its hello until the hello is
// acknowledged (stop-and-wait per peer), and the next thing a sender this node waits for sends
// is its knowledge, megabytes that libzmq allocates whole as soon as a frame's header arrives. So
// the inbox acknowledges the hellos of such senders only while fewer than a window of them are
// cleared and have not delivered yet; the others' acks wait their turn. A star's hub then holds
// a window's frames at once, not one per leaf. A cleared sender that does not deliver within the
// clearance time stops counting, so one that died or crawls holds no one else up for long.
#pragma once

#include "node/link_bytes.h"
#include "node/admission.h"
#include "node/outbox.h"
#include "node/secure_channel.h"
#include "node/incoming_streams.h"
#include "node/secure_stream.h"
#include "node/state_store.h"
#include "node/transport.h"

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fednode {

// What the inbox counted, for the node's result.
// How many senders whose knowledge is awaited may have their hello acknowledged at once, and for
// how long one counts; a window of 0 acknowledges every hello at once (no pacing).
struct Pacing {
  size_t window = 8;
  std::chrono::milliseconds clearance{15000};
  // The longest a hello waits for its turn before it is acknowledged anyway: a sender counts its
  // own ack deadline from the end of its plan, and one paced past it would end incomplete. The
  // node passes half its ack deadline.
  std::chrono::milliseconds longest_wait{30000};
};

struct InboxTally {
  int64_t hellos_paced = 0;       // hello acknowledgements that waited for their turn
  int64_t bytes_received = 0;     // frames, as they arrived
  int64_t bytes_answered = 0;     // acks and error replies sent
  LinkTally links;                // received: authenticated frames by sender; sent: the answers
  int64_t messages_received = 0;  // accepted (duplicates included)
  int64_t frames_rejected = 0;    // failed the opening checks or the plan
  // frames_rejected by reason: a step of opening that failed (SecurityCode's names), "undecodable",
  // "malformed-chunk", or "refused-by-plan" (docs/node.md, "metrics").
  std::map<std::string, int64_t> rejected_by;
  int64_t duplicates = 0;         // authentic repeats: acknowledged, not used
  int64_t chunks_dropped = 0;     // of streams refused at their head (a repeat), replaced or dropped
  int64_t streams_abandoned = 0;  // dropped unfinished: replaced, stalled, or left at close
};

class Inbox {
 public:
  // Every reference must outlive the inbox. The replay guard is loaded from `store`; `say` logs,
  // naming peers by `who`.
  Inbox(const SecureChannel& channel, StateStore& store, Transport& transport, Outbox& outbox, Admission& admission,
        Outbox::Say say, Outbox::Who who, Pacing pacing = {});

  // A restart: every message the state directory held (StateStore::received), decoded and
  // checked again (what a node accepted under older checks or limits may not pass now), goes to
  // the machine unannounced.
  Actions restore(std::vector<StoredMessage> stored, double now);
  // One frame from the transport, opened where it lies (its bytes are plaintext afterwards), or
  // one message of a version-2 stream: its head, then each chunk, opened as it comes; the
  // message is taken when its last chunk is in.
  Actions handle(Incoming& in, double now);
  // The cipher to seal streams to `peer` with, once it said (acknowledging this node's hello)
  // that it opens version 2 and a cipher this node has; none before, and none for a peer that
  // speaks version 1 only.
  std::optional<StreamCipher> stream_cipher(NodeId peer) const;
  // The line saying how many rejections went unlogged, if any (before the node reports).
  void say_rejections_left_out();
  // Streams whose chunks stopped coming for longer than `silence` (a connection that long silent
  // is dead, and a resend comes as a new stream) are dropped and said. The node calls it when it
  // has drained every frame waiting, so that no chunk of the stream is still queued.
  void drop_stalled_streams(std::chrono::milliseconds silence) {
    streams_.drop_stalled(silence);
    tally_.streams_abandoned = streams_.abandoned();
  }
  // The node closes: streams still unfinished are dropped and said.
  void drop_unfinished_streams() {
    streams_.drop_all("the node closes");
    tally_.streams_abandoned = streams_.abandoned();
  }

  // Peers that send receipts and have not yet sent the receipt of some acknowledgement of ours,
  // in ascending order. A peer sends receipts when its hello lists version 3, or once it sent
  // one; any other peer (another implementation without them) is not waited for.
  std::vector<NodeId> awaiting_receipts() const;
  // Acknowledges again each message whose receipt is overdue (reminder_interval since its last
  // ack), on the connection its sender last used: a receipt lost on the way is answered anew.
  // The closing node's loop.
  void remind(std::chrono::milliseconds reminder_interval);
  // Acknowledges again, at once, each message whose receipt is missing from a sender that came
  // back (a frame of it came on a new connection): the restarted sender hears of every message
  // of its earlier process that still waits, not only of the one it resent, while it still runs
  // (a ring's node back for its second pass may finish and be gone before its receiver closes).
  // Every step of the node; in a run without restarts it sends nothing.
  void remind_returned();

  // Receipts of this node's that the peer's queue had no room for are tried again; one that
  // still finds no room after kReceiptRetrySeconds is given up (its receiver asks again).
  void retry_receipts();
  // A restart: the receipts of the acks the earlier process recorded (Outbox::recorded_acks),
  // sent again on this node's own connection to each peer.
  void receipts_again(const std::vector<std::pair<NodeId, uint64_t>>& acks);
  // Some receipt of this node's is still to be sent: a closing node waits for it.
  // Also answers the transport holds until a queue has room (Transport::answers_waiting).
  bool receipts_unsent() const { return !unsent_receipts_.empty() || transport_.answers_waiting(); }

  // Acknowledges the hellos whose turn came: a cleared sender delivered, was given up on, or
  // outlived its clearance. The node calls it every step; handle() does after each frame.
  void pace();

  const InboxTally& tally() const { return tally_; }
  // When the last frame came (the closing node waits for a quiet moment).
  std::chrono::steady_clock::time_point last_frame() const { return last_frame_; }

 private:
  // A message opened whole (a frame, or a stream's last chunk): the plan's check, store, ack.
  Actions take(const Incoming& in, Message msg, std::string_view plaintext, double now);
  // The next chunk of the stream coming in on `in`'s connection.
  Actions continue_stream(Incoming& in, double now);
  // An ack for `to`, naming what this node opens when `to` said hello with version 2.
  Ack make_ack(NodeId to, uint64_t acked) const;
  // Steps 1-4 failed: answer an authentic duplicate with another ack, count the rest.
  void rejected(const Incoming& in, const RejectedMessage& e);
  void count_rejection(const std::string& reason);
  // An Ack or Error settles a frame in the outbox; an ack of our frame is answered with a receipt,
  // and a receipt (an ack of one of our acks) ends that wait.
  void settle(const Incoming& in, const Message& msg);
  // Step 5, and the plan's check: empty when the machine takes the message, else why not.
  std::string decode_and_check(const EnvelopeHeader& h, std::string_view plaintext, Payload& payload) const;
  // Acknowledges `acked` and waits for its receipt, also when the ack cannot go out now (its
  // sender will resend). False when it could not.
  bool send_ack(const ReplyPath& in, NodeId to, uint64_t acked);
  // Tells `to` that its ack `ack_id` is on disk; kept for retry_receipts() when not taken now.
  void send_receipt(const ReplyPath& in, NodeId to, uint64_t ack_id);
  // A hello (or a resent one) from `from`: acknowledged now, or when its turn comes.
  void answer_hello(const ReplyPath& in, NodeId from, uint64_t msg_id);
  void send_error(const ReplyPath& in, NodeId to, ErrorReason reason, uint64_t ref, bool abort, const std::string& text);
  // Seals `p` with a new message id and replies on `in`'s connection: the id, or 0 when that
  // connection is gone or has no room.
  uint64_t answer(const ReplyPath& in, NodeId to, const Payload& p);
  // Hands a sealed answer to the transport and counts it: false when it was not taken.
  bool deliver(const ReplyPath& in, NodeId to, const std::string& frame);
  // At most kRejectionLines lines per kRejectionWindow, then one line saying how many were left out:
  // a flood of bad frames must not flood the log as well.
  void say_rejection(const std::string& line);

  const SecureChannel& channel_;
  StateStore& store_;
  Transport& transport_;
  Outbox& outbox_;
  Admission& admission_;
  Outbox::Say say_;
  Outbox::Who who_;
  ReplayGuard replay_;
  InboxTally tally_;
  // A message this node acknowledged whose receipt has not come.
  struct AwaitedReceipt {
    NodeId from = 0;
    uint64_t msg_id = 0;
    std::vector<uint64_t> ack_ids;  // every ack sent for it: a receipt names one of them
    std::chrono::steady_clock::time_point acked_at{};
    bool sender_returned = false;   // its sender came on a new connection since the last ack
  };
  std::vector<AwaitedReceipt> awaited_;
  // Sends `a`'s message's ack once more, on its sender's newest connection.
  void ack_again(AwaitedReceipt& a);
  // The connection each peer's newest acknowledged frame came in on: reminders go there.
  std::map<NodeId, ReplyPath> last_path_;
  // Receipts the peer's queue had no room for, sealed, and since when.
  struct UnsentReceipt {
    NodeId to = 0;
    std::string frame;
    ReplyPath path;
    std::chrono::steady_clock::time_point since{};
  };
  std::vector<UnsentReceipt> unsent_receipts_;
  Pacing pacing_;
  // Senders whose hello was acknowledged while their knowledge is awaited, and since when.
  std::map<NodeId, std::chrono::steady_clock::time_point> cleared_;
  // Hellos waiting for their turn, oldest first; one per sender (the newest connection).
  struct PacedHello {
    NodeId from = 0;
    uint64_t msg_id = 0;
    ReplyPath path;
    std::chrono::steady_clock::time_point since{};  // the first of its copies to wait
  };
  std::deque<PacedHello> paced_;
  std::set<NodeId> sends_receipts_;  // said so in their hello (version 3), or sent one
  // Streams being received, by connection (Incoming::route, or the DEALER's peer).
  IncomingStreams streams_;
  std::set<NodeId> says_version2_;                  // their hello listed version 2
  std::map<NodeId, StreamCipher> stream_ciphers_;   // their ack said they open these
  std::chrono::steady_clock::time_point last_frame_{};
  std::chrono::steady_clock::time_point rejection_window_{};
  int rejections_said_ = 0;
  int64_t rejections_unsaid_ = 0;
};

}  // namespace fednode
