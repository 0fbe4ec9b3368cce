#include "node/outbox.h"

#include "core/elapsed.h"
#include "node/transport.h"

#include <algorithm>
#include <sstream>
#include <set>
#include <utility>

namespace fednode {

using Clock = std::chrono::steady_clock;

Outbox::Outbox(StateStore& store, Transport& transport, OutboxTiming timing, Say say, Who who, NodeId self,
               uint64_t max_frame_bytes, Seal seal)
    : store_(store),
      transport_(transport),
      timing_(timing),
      say_(std::move(say)),
      who_(std::move(who)),
      self_(self),
      max_frame_bytes_(max_frame_bytes),
      seal_(std::move(seal)) {}

namespace {

// Frames from here up are kept on disk between sends and count against the send window: a
// knowledge message or a head, not a hello or an ack.
constexpr size_t kLargeFrameBytes = size_t{256} << 10;
constexpr uint64_t kFramingBytes = 1024;

}  // namespace

Outbox::Pending Outbox::pending_for(OutboxEntry e) {
  Pending p;
  p.frame_bytes = e.frame.size();
  if (p.frame_bytes >= kLargeFrameBytes) std::string().swap(e.frame);
  p.entry = std::move(e);
  return p;
}

size_t Outbox::large_frames_in_flight(Clock::time_point now) const {
  size_t n = 0;
  for (const auto& p : pending_)
    if (p.open() && p.tries > 0 && p.frame_bytes >= kLargeFrameBytes && now - p.handed_over < timing_.window_hold) ++n;
  return n;
}

void Outbox::restore(std::vector<OutboxEntry> entries) {
  for (auto& e : entries) {
    Pending p = pending_for(std::move(e));
    // A node killed between storing an offer and noting the older one replaced.
    if (p.offer() && p.open()) give_up_open_offers(p.entry.to);
    pending_.push_back(std::move(p));
  }
}

void Outbox::add(OutboxEntry e) {
  store_.store_outgoing(e);
  // Stored first: a kill between the two leaves both open, and restore() settles that.
  if (e.phase == kOfferPhase) give_up_open_offers(e.to);
  pending_.push_back(pending_for(std::move(e)));
}

void Outbox::queue(NodeId to, MessageType type, int phase, int64_t counted_bytes,
                   const std::function<std::string(uint64_t msg_id)>& make) {
  OutboxEntry e;
  e.seq = store_.next_seq();
  e.to = to;
  e.type = type;
  e.phase = phase;
  e.msg_id = store_.next_msg_id();
  e.frame = make(e.msg_id);
  e.counted_bytes = counted_bytes;
  // A stored payload is framed when it is sealed (header, tags, nonce): well under kFramingBytes.
  const uint64_t framed = e.frame.size() + (seal_ ? kFramingBytes : 0);
  if (framed > max_frame_bytes_)
    throw InputError("node " + std::to_string(self_) + ": the " + to_string(type) + " message for " + who_(to) +
                     " would be " + std::to_string(e.frame.size()) + " bytes and its framing, above max_message_bytes (" +
                     std::to_string(max_frame_bytes_) +
                     ") that nodes accept; send less (fewer components, a smaller feature expansion), or "
                     "raise the limit at every node (Limits::max_message_bytes in an embedding application's "
                     "NodeConfig; fednode run uses the default)");
  add(std::move(e));
}

void Outbox::give_up_open_offers(std::optional<NodeId> to) {
  for (auto& p : pending_)
    if (p.offer() && p.open() && (!to || p.entry.to == *to)) give_up(p);
}

void Outbox::give_up(Pending& p) {
  p.entry.given_up = true;
  p.ready.reset();
  store_.mark_given_up(p.entry);
  // Sent and never taken, it may still wait in the peer's one-frame queue, and a peer that
  // comes back (run again) would get it first: an older head, ahead of the newer offer.
  if (p.tries > 0) transport_.drop_queued(p.entry.to);
}

void Outbox::give_up_offers() { give_up_open_offers(std::nullopt); }

bool Outbox::offer_expired(const Pending& p) const {
  return p.offer() && p.attempted() && seconds_since(p.first_try) > timing_.warn_after_seconds;
}

bool Outbox::acknowledged(NodeId from, uint64_t msg_id, uint64_t ack_id) {
  bool ours = false;
  for (auto& p : pending_) {
    if (p.entry.to != from || p.entry.msg_id != msg_id) continue;
    ours = true;
    if (p.entry.acked) continue;
    p.entry.acked = true;
    p.entry.ack_id = ack_id;
    p.ready.reset();
    store_.mark_acked(p.entry);
    if (p.warned) say_(who_(from) + " acknowledged at last");
  }
  return ours;
}

std::vector<std::pair<NodeId, uint64_t>> Outbox::recorded_acks() const {
  std::vector<std::pair<NodeId, uint64_t>> out;
  for (const auto& p : pending_)
    if (p.entry.acked && p.entry.ack_id) out.emplace_back(p.entry.to, p.entry.ack_id);
  return out;
}

void Outbox::refused(NodeId from, uint64_t msg_id) {
  for (auto& p : pending_)
    if (p.entry.to == from && p.entry.msg_id == msg_id && p.open()) {
      p.entry.failed = true;
      store_.mark_failed(p.entry);
    }
}

namespace {

size_t wire_size(const Outbox::Handover& h) {
  if (auto* frame = std::get_if<std::string>(&h)) return frame->size();
  size_t bytes = 0;
  if (const auto& stream = std::get<std::unique_ptr<OutgoingMessages>>(h))
    for (size_t i = 0; i < stream->count(); ++i) bytes += stream->size(i);
  return bytes;
}

}  // namespace

SendTally Outbox::pump() {
  SendTally tally;
  const auto now = Clock::now();
  std::set<NodeId> busy;  // peers with an earlier frame still unsettled
  size_t in_flight = timing_.send_window > 0 ? large_frames_in_flight(now) : 0;
  for (auto& p : pending_) {
    if (!p.open()) continue;
    if (offer_expired(p)) {
      std::ostringstream limit;
      limit << timing_.warn_after_seconds;
      // Not "did not take": a peer that took an earlier copy and closed before its acknowledgement
      // got through (or before this node was restarted) never answers either.
      say_.warn(who_(p.entry.to) + " did not acknowledge " + to_string(p.entry.type) + " " +
           std::to_string(p.entry.msg_id) + " in the " + limit.str() +
           " s it was offered for (it has most likely closed); no longer offering it");
      give_up(p);
      continue;
    }
    if (!busy.insert(p.entry.to).second) continue;
    if (p.attempted()) warn_if_silent(p);
    const uint64_t breaks = transport_.breaks(p.entry.to);
    const bool broke = p.tries > 0 && breaks > p.breaks_at_send;
    if (now < p.next_try && !broke) continue;
    const bool large = p.frame_bytes >= kLargeFrameBytes;
    // A first send waits for room in the window; a resend after a break takes its place again.
    if (large && timing_.send_window > 0 && p.tries == 0 && in_flight >= timing_.send_window) continue;
    if (!p.attempted()) p.first_try = now;
    // Read from disk and sealed once per handover, not once per try: while the peer's queue is
    // full the sealed message stays in memory, and it is dropped once ZeroMQ has it.
    if (!p.ready) {
      std::string stored = p.entry.frame.empty() ? store_.outgoing_frame(p.entry) : p.entry.frame;
      p.ready = seal_ ? seal_(p.entry, std::move(stored)) : Handover(std::move(stored));
    }
    const size_t wire_bytes = wire_size(*p.ready);  // before the transport takes a stream over
    const bool taken = std::visit([&](auto& m) { return transport_.send(p.entry.to, m); }, *p.ready);
    if (!taken) {
      // The peer's one-frame queue is full (a copy of this frame waits there while the peer is
      // down, or a receipt that goes out in a moment), or an earlier stream to it is still being
      // handed over. Tried again soon, then less and less often.
      p.queue_backoff = std::clamp(p.queue_backoff * 2, std::chrono::milliseconds(1), timing_.retry_initial);
      p.next_try = now + p.queue_backoff;
      continue;
    }
    p.ready.reset();
    p.queue_backoff = std::chrono::milliseconds(0);
    if (large && now - p.handed_over >= timing_.window_hold) ++in_flight;
    p.handed_over = now;
    tally.bytes += static_cast<int64_t>(wire_bytes);
    tally.bytes_to[p.entry.to] += static_cast<int64_t>(wire_bytes);
    if (p.tries == 0) ++tally.messages;
    else ++tally.resends;
    ++p.tries;
    p.breaks_at_send = breaks;
    schedule_retry(p, now);
  }
  return tally;
}

void Outbox::schedule_retry(Pending& p, Clock::time_point now) {
  // Long enough for a large frame to be received and stored (at a pessimistic 20 MB/s) on top,
  // so that a multi-megabyte head is not sent twice for nothing. Capped at an hour: doubling
  // must not overflow in a run that lasts days.
  const auto transfer = std::chrono::milliseconds(static_cast<int64_t>(p.frame_bytes / 20000));
  p.backoff = p.backoff.count() == 0 ? timing_.resend_after + transfer
                                     : std::min(p.backoff * 2, std::chrono::milliseconds(3600 * 1000));
  p.next_try = now + p.backoff;
}

void Outbox::warn_if_silent(Pending& p) {
  if (!p.offer() && !p.warned && seconds_since(p.first_try) > timing_.warn_after_seconds) {
    p.warned = true;
    say_.warn(who_(p.entry.to) + " has not acknowledged " + to_string(p.entry.type) + " " + std::to_string(p.entry.msg_id) +
         " for " + std::to_string(static_cast<int>(seconds_since(p.first_try))) + " s; still trying");
  }
}

bool Outbox::settled() const {
  return std::none_of(pending_.begin(), pending_.end(), [](const Pending& p) { return p.open(); });
}

std::chrono::milliseconds Outbox::until_next_resend(std::chrono::milliseconds cap) const {
  auto wait = cap;
  const auto now = Clock::now();
  const auto until = [&](Clock::time_point t) {
    return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(t - now));
  };
  for (const auto& p : pending_)
    if (p.open() && p.attempted()) {
      wait = std::min(wait, until(p.next_try));
      // An offer is given up on time, not at its next resend.
      if (p.offer())
        wait = std::min(wait, until(p.first_try + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(timing_.warn_after_seconds))));
    }
  return wait;
}

std::vector<NodeId> Outbox::refusers() const {
  std::vector<NodeId> ids;
  for (const auto& p : pending_)
    if (p.entry.failed) ids.push_back(p.entry.to);
  return ids;
}

std::vector<NodeId> Outbox::unacknowledged() const {
  std::vector<NodeId> ids;
  for (const auto& p : pending_)
    if (p.open() && !p.offer()) ids.push_back(p.entry.to);
  return ids;
}

}  // namespace fednode
