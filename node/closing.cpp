#include "node/closing.h"

#include "core/elapsed.h"

namespace fednode {
namespace {

constexpr double kClosingGrace = 1.0, kClosingQuiet = 0.5, kClosingMax = 10.0;
// An outstanding receipt is asked for again (the message acknowledged again) this often, and at
// any time at once when its sender comes back on a new connection (Inbox::remind_returned); the
// wait is said after kReceiptPatience seconds of closing (a busy hub's receipts take a moment).
constexpr std::chrono::milliseconds kReceiptReminder{1000};
constexpr double kReceiptPatience = 5.0;

}  // namespace

Closing::Closing(Inbox& inbox, double ack_deadline_seconds, Say say, std::function<std::string(NodeId)> who)
    : inbox_(inbox), ack_deadline_(ack_deadline_seconds), say_(std::move(say)), who_(std::move(who)) {}

void Closing::begin() { since_ = std::chrono::steady_clock::now(); }

bool Closing::may_close() {
  inbox_.retry_receipts();
  inbox_.remind(kReceiptReminder);
  const double open_for = seconds_since(since_);
  const bool answered = open_for >= kClosingMax || (open_for >= kClosingGrace &&
                                                    seconds_since(inbox_.last_frame()) >= kClosingQuiet &&
                                                    !inbox_.receipts_unsent());
  return answered && receipts_settled(open_for);
}

bool Closing::receipts_settled(double open_for) {
  const std::vector<NodeId> waiting = inbox_.awaiting_receipts();
  if (waiting.empty()) return true;
  std::string peers;
  for (NodeId id : waiting) peers += (peers.empty() ? "" : ", ") + who_(id);
  if (open_for >= ack_deadline_) {
    say_.warn("closing without the receipt of my acknowledgements from " + peers + " after " +
              std::to_string(static_cast<int>(ack_deadline_)) +
              " s; a sender restarted from now on will end incomplete though its message arrived");
    return true;
  }
  if (!said_receipt_wait_ && open_for >= kReceiptPatience) {
    said_receipt_wait_ = true;
    say_("waiting for " + peers + " to confirm it stored my acknowledgement (it may be restarting; up to " +
         std::to_string(static_cast<int>(ack_deadline_)) + " s)");
  }
  return false;
}

}  // namespace fednode
