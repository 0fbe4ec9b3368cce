// A node's state directory: everything it must not lose when it is killed, so that restarting it
// with the same command continues the run (docs/node.md, "State directory"). The node writes what
// it received here before it acknowledges it, and what it will send here before it sends it.
//
//   run                   the run id this directory belongs to (another run's directory is refused)
//   msg_ids               the next message id not yet handed out, reserved ahead in blocks (checksummed)
//   starts                how many times a node started on this directory
//   replay                the replay guard (crypto/replay.h)
//   inbox/F-M.msg         message M from node F, as accepted (type and payload plaintext)
//   outbox/S.frame        the S-th message this node sends (recipient, id, type and payload bytes,
//                         sealed anew at each send: as a frame, or as a version-2 stream)
//   outbox/S.acked        its acknowledgement arrived: the ack's message id, in decimal (empty when
//                         written by an older fednode); S.failed: the recipient refused it
//   phase1, phase2        the phase is done and everything it sends is in the outbox
//   head.state            the node's current head and whose data it holds (checksummed)
//   head                  the same head as a head file (node/head_io.h) for predict, export and applications
//   personal_head         personalised FedCGS: the node's personal head, as a head file
//   result.json           the node's result
//   configuration         what decides the result (node/configuration_record.h)
//   lock                  held (flock) by the node using the directory
#pragma once

#include "crypto/replay.h"
#include "node/head_io.h"
#include "node/machine_action.h"
#include "protocol/messages.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

struct StoredMessage {
  NodeId from = 0;
  uint64_t msg_id = 0;
  MessageType type = MessageType::Knowledge;
  std::string plaintext;  // the payload as it arrived (decoded again on restart)
};


struct OutboxEntry {
  uint64_t seq = 0;       // send order over all peers
  NodeId to = 0;
  uint64_t msg_id = 0;
  MessageType type = MessageType::Knowledge;
  int phase = 0;          // 0 hello, 1 and 2 the plan's phases, kOfferPhase an offer
  std::string frame;      // what is sent: the node stores the payload and seals it at each send
  int64_t counted_bytes = 0;  // the payload as `fednode simulate` counts it (knowledge_bytes_sent)
  bool acked = false;
  uint64_t ack_id = 0;    // the msg_id of the ack that settled it, for a receipt after a restart (0: not known)
  bool failed = false;    // the peer refused it; not sent again
  bool given_up = false;  // an offer nobody took in time, or one that a newer offer replaced
};

class StateStore {
 public:
  // Opens `dir`, creating it (and inbox/, outbox/) if needed, and holds it: a second StateStore
  // on the same directory, in this process or another, is refused until this one is destroyed.
  // Throws InputError when it is held, belongs to another run, or is not usable.
  StateStore(std::string dir, const RunId& run, uint64_t max_file_bytes);
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Message ids: strictly increasing over the run, across restarts. Reserving ahead in blocks
  // costs one durable write per block instead of one per message; a restart skips the rest of
  // the block it was in.
  uint64_t next_msg_id();

  ReplayGuard load_replay() const;
  void save_replay(const ReplayGuard& guard);

  // `plaintext`: the payload as it arrived.
  void store_received(NodeId from, uint64_t msg_id, MessageType type, std::string_view plaintext);
  // Sorted by sender, then message id. Throws InputError naming a damaged file.
  std::vector<StoredMessage> received() const;

  void store_outgoing(const OutboxEntry& e);
  void mark_acked(const OutboxEntry& e);
  void mark_failed(const OutboxEntry& e);
  void mark_given_up(const OutboxEntry& e);
  std::vector<OutboxEntry> outbox() const;  // by seq
  // The bytes of `e` as stored (the outbox keeps large messages on disk, not in memory).
  std::string outgoing_frame(const OutboxEntry& e) const;
  void drop_outgoing(int phase);            // a phase redone after a crash sends afresh
  uint64_t next_seq() const;

  // Counts this start in the directory; returns how many starts came before it.
  int count_start();
  // Whether a node has started on this directory before (count_start was called).
  bool started_before() const;

  bool has_marker(const std::string& name) const;
  void set_marker(const std::string& name);

  // What the head files `head` and `personal_head` say about their heads beside whose data they
  // hold (node/head_io.h): the node's method, run, classes and feature recipe. Set before the
  // first save_head or load_head; without it the files still name the head's kind and shape.
  void describe_heads(HeadCard card) { head_card_ = std::move(card); }
  // The head and whose data it was trained on.
  void save_head(const class Head& head, const Contributors& contributors);
  // Personalised FedCGS: the personal head, as a head file (recomputed at every finish).
  void save_personal_head(const class Head& head);
  // Null when none was saved; throws InputError for a damaged record. Brings `head` (the copy
  // for applications) up to date if a crash left it behind.
  std::unique_ptr<Head> load_head(Contributors* contributors);

  void write_text(const std::string& name, const std::string& text);
  // The file's text, or nothing when it does not exist; throws InputError beyond max_bytes.
  std::optional<std::string> read_text(const std::string& name, uint64_t max_bytes) const;

 private:
  HeadCard head_card_;
  std::string outbox_name(const OutboxEntry& e) const;

  std::string dir_;
  uint64_t max_file_bytes_;
  uint64_t id_next_ = 1, id_reserved_ = 0;
  // flock(2) on dir/lock, held while the store lives; released by closing (also when the
  // constructor throws after taking it).
  struct HeldLock {
    int fd = -1;
    HeldLock() = default;
    HeldLock(const HeldLock&) = delete;
    HeldLock& operator=(const HeldLock&) = delete;
    ~HeldLock();
  };
  HeldLock lock_;
};

}  // namespace fednode
