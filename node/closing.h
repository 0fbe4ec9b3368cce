// Closing with receipts (docs/node.md, "What a restart guarantees"): a module the node composes
// once it has finished. The node keeps answering for a moment, since its last acknowledgement may
// be lost when it closes its connection (ZeroMQ drops what the peer has not read yet from a
// connection that goes away) and the peer's resend must then find it still there: at least
// kClosingGrace seconds, and kClosingQuiet without a frame (a peer still resending keeps it open,
// up to 10 s), or while a receipt of its own has not gone out yet; and while a receipt it waits
// for is outstanding, up to the ack deadline, asking for it again every second.
#pragma once

#include "core/log.h"
#include "node/inbox.h"

#include <chrono>
#include <functional>
#include <string>

namespace fednode {

class Closing {
 public:
  Closing(Inbox& inbox, double ack_deadline_seconds, Say say, std::function<std::string(NodeId)> who);

  // The node finished (again: a node that reopened to refit closes anew).
  void begin();
  // One turn while closing: unsent receipts retried, overdue ones asked for again. True once the
  // node may close.
  bool may_close();

 private:
  // Whether every receipt came, or the ack deadline passed (a sender restarted after that ends
  // incomplete).
  bool receipts_settled(double open_for);

  Inbox& inbox_;
  double ack_deadline_;
  Say say_;
  std::function<std::string(NodeId)> who_;
  std::chrono::steady_clock::time_point since_{};
  bool said_receipt_wait_ = false;
};

}  // namespace fednode
