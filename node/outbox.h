#pragma once
// The frames a node has sealed and still has to deliver (docs/node.md, "Reliability").
//
// Each frame is on disk (StateStore) before its first send, and is sent again until the peer
// acknowledges or refuses it: at once when the connection it went out on broke since (the frame
// or its ack may be lost; Transport::breaks), and otherwise only after a long silence, with
// exponential backoff. A resend on a connection that did not break would only put a duplicate
// on the wire behind the original — a busy hub, slow to acknowledge, drew hundreds of those
// from its leaves when resends came every few hundred milliseconds. Stop-and-wait per peer: a peer gets its next
// frame only once the previous one is settled, so frames to one peer arrive in the order they were
// queued (hello, knowledge, complete) even across resends and restarts. An offer (kOfferPhase)
// unacknowledged for warn_after_seconds after its first send is given up on, with one line, and
// a newer offer to the same peer replaces an older one still open; both are noted on disk.

#include "core/log.h"
#include "core/contributors.h"
#include "node/state_store.h"
#include "node/transport.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace fednode {

// NodeConfig's resend timing.
struct OutboxTiming {
  // A frame the peer's one-frame queue did not take (an earlier copy still waits there while
  // the peer is down, or a receipt) is tried again after 1 ms, doubling up to this.
  std::chrono::milliseconds retry_initial;
  // On a connection that did not break, a frame unacknowledged for this long (plus its transfer
  // time at a pessimistic 20 MB/s) is sent again, then after twice as long, and so on.
  std::chrono::milliseconds resend_after;
  double warn_after_seconds;  // a frame unacknowledged this long is reported, once; an offer, given up
  // At most this many large frames (kLargeFrameBytes and up) are handed to ZeroMQ and not yet
  // acknowledged at once; each counts for window_hold after it went out at most, so that a peer
  // that never answers holds no one else up for long. A star's hub sending a 5 MB adapter head to
  // 128 leaves held all 128 sealed copies at once (docs/node.md, "Pacing"). 0: no window.
  size_t send_window = 8;
  std::chrono::milliseconds window_hold{15000};
};

// What one pump() handed to ZeroMQ.
struct SendTally {
  int64_t bytes = 0;
  std::map<NodeId, int64_t> bytes_to;  // the same by peer
  int64_t messages = 0;  // first sends
  int64_t resends = 0;
};

class Outbox {
 public:
  using Say = fednode::Say;
  using Who = std::function<std::string(NodeId)>;
  // What goes on the wire for a stored message, made at each handover: the node stores a
  // message's payload and seals it for its peer when it sends it, as one frame or, to a peer
  // that opens them, as a version-2 stream whose chunks are sealed as they go out (node.cpp).
  // Without a Seal the stored bytes go out as they are.
  using Handover = std::variant<std::string, std::unique_ptr<OutgoingMessages>>;
  using Seal = std::function<Handover(const OutboxEntry& e, std::string stored)>;

  // `store` and `transport` must outlive the outbox; `say` reports slow peers, naming them by `who`.
  // `self` names this node in errors; `max_frame_bytes` is the largest frame peers accept.
  Outbox(StateStore& store, Transport& transport, OutboxTiming timing, Say say, Who who, NodeId self = 0,
         uint64_t max_frame_bytes = UINT64_MAX, Seal seal = nullptr);

  // The entries a restart found in the state directory (stored already), in send order.
  void restore(std::vector<OutboxEntry> entries);
  // Stores `e` durably, then queues it behind what its peer has not settled yet.
  void add(OutboxEntry e);
  // The same for the bytes `make` gives for the next message id (the node: the encoded payload).
  // Throws InputError, before storing anything, when they are larger than peers accept: their
  // transport would drop the frame (ZMQ_MAXMSGSIZE) without telling anyone, and every resend too.
  void queue(NodeId to, MessageType type, int phase, int64_t counted_bytes,
             const std::function<std::string(uint64_t msg_id)>& make);

  // The node is done: offers still open are given up (and so not made again by a rerun).
  void give_up_offers();

  // True when `msg_id` is a frame this outbox sent `from` (acknowledged now or before): the ack
  // is on disk, and the caller may tell the peer so (a receipt, docs/protocol.md 5.4). `ack_id`,
  // the ack's own message id, is recorded with it (recorded_acks()).
  bool acknowledged(NodeId from, uint64_t msg_id, uint64_t ack_id = 0);
  // Each recorded ack whose id is known, as (peer, ack id): a restarted node sends their
  // receipts again, since it may have been killed between recording an ack and its receipt.
  std::vector<std::pair<NodeId, uint64_t>> recorded_acks() const;
  void refused(NodeId from, uint64_t msg_id);

  // Sends every peer's oldest unsettled frame whose next try is due, or whose connection broke
  // since it was handed over.
  SendTally pump();
  // Every frame acknowledged or refused, or an offer given up on.
  bool settled() const;
  // How long until a timed resend is due, at least 1 ms; `cap` if none is due sooner. (A broken
  // connection ends the transport's wait by itself.)
  std::chrono::milliseconds until_next_resend(std::chrono::milliseconds cap) const;

  // The peer of each refused frame, and of each frame neither acknowledged nor refused (offers
  // aside: a peer that did not take one has not failed the plan), in send order (a peer appears
  // once per such frame).
  std::vector<NodeId> refusers() const;
  std::vector<NodeId> unacknowledged() const;

 private:
  struct Pending {
    OutboxEntry entry;
    std::chrono::steady_clock::time_point next_try{}, first_try{};
    std::chrono::milliseconds backoff{0};
    uint64_t breaks_at_send = 0;  // Transport::breaks of the peer when it was last handed over
    std::chrono::milliseconds queue_backoff{0};  // while the peer's queue is full
    int tries = 0;  // times handed over to the transport
    std::chrono::steady_clock::time_point handed_over{};  // last time
    size_t frame_bytes = 0;  // entry.frame's size; a large frame is kept on disk, not in memory
    // Sealed for a handover the peer's queue did not take yet: tried again as it is.
    std::optional<Handover> ready;
    bool warned = false;
    bool open() const { return !entry.acked && !entry.failed && !entry.given_up; }
    bool offer() const { return entry.phase == kOfferPhase; }
    bool attempted() const { return first_try != std::chrono::steady_clock::time_point{}; }
  };
  void schedule_retry(Pending& p, std::chrono::steady_clock::time_point now);
  // A pending frame for `e`: a large frame's bytes stay on disk until each send reads them.
  static Pending pending_for(OutboxEntry e);
  // Large frames handed over, unacknowledged, within their window_hold.
  size_t large_frames_in_flight(std::chrono::steady_clock::time_point now) const;
  // Says once that the peer has not acknowledged `p` for warn_after_seconds.
  void warn_if_silent(Pending& p);
  void give_up(Pending& p);
  // Gives up the open offers to `to` (a newer one replaces them), or to everyone.
  void give_up_open_offers(std::optional<NodeId> to);
  bool offer_expired(const Pending& p) const;

  StateStore& store_;
  Transport& transport_;
  OutboxTiming timing_;
  Say say_;
  Who who_;
  NodeId self_;
  uint64_t max_frame_bytes_;
  Seal seal_;
  std::vector<Pending> pending_;  // by seq
};

}  // namespace fednode
