#include "node/inbox.h"

#include "node/printable.h"

#include <algorithm>
#include <iterator>

namespace fednode {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRejectionLines = 20;
constexpr double kRejectionWindow = 10.0;
// A receipt is tried again while the peer's queue has no room (it was taken up by a frame still
// on its way), but not forever: a receiver that waits for it acknowledges again, and each new
// ack draws a new receipt.
constexpr double kReceiptRetrySeconds = 3.0;

bool routed(MessageType t) {
  return t == MessageType::Knowledge || t == MessageType::Complete || t == MessageType::Head ||
         t == MessageType::UnmaskRequest || t == MessageType::UnmaskReply;
}

}  // namespace

Inbox::Inbox(const SecureChannel& channel, StateStore& store, Transport& transport, Outbox& outbox, Admission& admission,
             Outbox::Say say, Outbox::Who who, Pacing pacing)
    : channel_(channel),
      store_(store),
      transport_(transport),
      outbox_(outbox),
      admission_(admission),
      say_(std::move(say)),
      who_(std::move(who)),
      replay_(store.load_replay()),
      pacing_(pacing),
      streams_(say_, who_) {}

Actions Inbox::restore(std::vector<StoredMessage> stored_messages, double now) {
  Actions out;
  for (const StoredMessage& m : stored_messages) {
    OpenedFrame stored;
    stored.header.type = m.type;
    stored.header.from = m.from;
    stored.header.to = channel_.id();
    stored.header.msg_id = m.msg_id;
    stored.header.run = channel_.run();
    stored.plaintext = m.plaintext;
    Payload payload;
    const std::string refusal = decode_and_check(stored.header, stored.plaintext, payload);
    if (!refusal.empty()) {
      say_.warn("not using the stored " + std::string(to_string(m.type)) + " " + std::to_string(m.msg_id) + " from " +
           who_(m.from) + ": " + refusal);
      continue;
    }
    Actions a = admission_.accept(m.from, m.msg_id, m.type, std::move(payload), /*fresh=*/false, now);
    out.insert(out.end(), std::make_move_iterator(a.begin()), std::make_move_iterator(a.end()));
  }
  return out;
}

std::string Inbox::decode_and_check(const EnvelopeHeader& h, std::string_view plaintext, Payload& payload) const {
  try {
    payload = decode_opened(OpenedFrame{h, plaintext}, channel_.limits());
    return admission_.refusal(h.from, h.type, payload);
  } catch (const std::exception& e) {
    return e.what();
  }
}

namespace {

std::string connection_of(const Incoming& in) {
  return in.via_dealer ? "dealer " + std::to_string(*in.via_dealer) : "route " + in.route;
}

}  // namespace

Actions Inbox::handle(Incoming& in, double now) {
  last_frame_ = Clock::now();
  tally_.bytes_received += static_cast<int64_t>(in.frame.size());
  if (is_chunk_message(in.frame.view())) return continue_stream(in, now);
  Message msg;
  std::string_view plaintext;
  try {
    auto head = channel_.open_head(in.frame.data(), in.frame.size(), replay_);
    if (auto* stream = std::get_if<std::unique_ptr<IncomingStream>>(&head)) {
      tally_.links[(*stream)->header().from].received += static_cast<int64_t>(in.frame.size());
      streams_.begin(connection_of(in), std::move(*stream));
      tally_.streams_abandoned = streams_.abandoned();
      return {};
    }
    const OpenedFrame& opened = std::get<OpenedFrame>(head);
    tally_.links[opened.header.from].received += static_cast<int64_t>(in.frame.size());
    msg.header = opened.header;
    msg.payload = decode_opened(opened, channel_.limits());
    plaintext = opened.plaintext;
    replay_.accept(msg.header.from, msg.header.msg_id);
  } catch (const RejectedMessage& e) {
    rejected(in, e);
    return {};
  } catch (const std::exception& e) {
    count_rejection("undecodable");
    say_rejection(std::string("rejected a frame: ") + e.what());
    return {};
  }
  return take(in, std::move(msg), plaintext, now);
}

Actions Inbox::continue_stream(Incoming& in, double now) {
  ChunkView chunk;
  try {
    chunk = decode_chunk(in.frame.view(), channel_.limits());
  } catch (const std::exception& e) {
    count_rejection("malformed-chunk");
    say_rejection(std::string("rejected a stream chunk: ") + e.what());
    return {};
  }
  const std::string connection = connection_of(in);
  IncomingStream* in_progress = streams_.find(connection, chunk.msg_id);
  // The rest of a stream refused at its head (a repeat, acknowledged again there), replaced or dropped.
  if (!in_progress) {
    ++tally_.chunks_dropped;
    return {};
  }
  tally_.links[in_progress->header().from].received += static_cast<int64_t>(in.frame.size());
  std::unique_ptr<IncomingStream> stream;
  Message msg;
  try {
    in_progress->add(chunk, std::move(in.frame));
    streams_.touched(connection);
    if (!in_progress->complete()) return {};
    stream = streams_.take(connection);
    msg.header = stream->header();
    msg.payload = decode_opened(stream->opened(), channel_.limits());
    replay_.accept(msg.header.from, msg.header.msg_id);
  } catch (const RejectedMessage& e) {
    streams_.take(connection);
    rejected(in, e);
    return {};
  }
  return take(in, std::move(msg), stream->opened().plaintext, now);
}

std::optional<StreamCipher> Inbox::stream_cipher(NodeId peer) const {
  const auto it = stream_ciphers_.find(peer);
  if (it == stream_ciphers_.end()) return std::nullopt;
  return it->second;
}

Ack Inbox::make_ack(NodeId to, uint64_t acked) const {
  Ack a;
  a.acked_id = acked;
  if (says_version2_.count(to)) {
    a.versions = {kProtocolVersion, kStreamVersion};
    for (StreamCipher c : available_stream_ciphers()) a.ciphers.push_back(to_string(c));
  }
  return a;
}

Actions Inbox::take(const Incoming& in, Message msg, std::string_view plaintext, double now) {
  const auto& h = msg.header;
  if (h.type == MessageType::Ack || h.type == MessageType::Error) {
    settle(in, msg);
    return {};
  }
  std::string refusal;
  try {
    refusal = admission_.refusal(h.from, h.type, msg.payload);
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  if (!refusal.empty()) {
    count_rejection("refused-by-plan");
    say_rejection("refused " + std::string(to_string(h.type)) + " " + std::to_string(h.msg_id) + " from " +
                  who_(h.from) + ": " + refusal);
    // Another feature space is `incompatible`, anything else the plan or the method refuses
    // `rejected`; only a refused hello abandons the run with that peer (docs/protocol.md, 5.5).
    const bool incompatible = h.type == MessageType::Hello || admission_.incompatible(h.type, msg.payload);
    send_error(in, h.from, incompatible ? ErrorReason::Incompatible : ErrorReason::Rejected, h.msg_id,
               h.type == MessageType::Hello, refusal);
    return {};
  }
  ++tally_.messages_received;
  Actions out;
  // Stored before acknowledged: once the sender hears the ack it never sends this again.
  const bool repeat = h.type != MessageType::Hello && admission_.is_repeat(h.from, h.type, msg.payload);
  if (repeat) ++tally_.duplicates;
  if (h.type != MessageType::Hello && !repeat) {
    store_.store_received(h.from, h.msg_id, h.type, plaintext);  // as it arrived; decoded again on a restart
    out = admission_.accept(h.from, h.msg_id, h.type, std::move(msg.payload), /*fresh=*/true, now);
  } else if (h.type == MessageType::Hello) {
    const Hello& hello = std::get<Hello>(msg.payload);
    const auto lists = [&](uint32_t v) { return std::find(hello.versions.begin(), hello.versions.end(), v) != hello.versions.end(); };
    if (lists(kStreamVersion)) says_version2_.insert(h.from);
    // Known before the first message that needs a receipt: the sender may be killed before any
    // receipt of its leaves, and this node must then still be there for its resend.
    if (lists(kReceiptsVersion)) sends_receipts_.insert(h.from);
    say_(who_(h.from) + " says hello (" + printable(hello.software) + ")");
  }
  store_.save_replay(replay_);
  if (h.type == MessageType::Hello) {
    answer_hello(in, h.from, h.msg_id);
  } else {
    send_ack(in, h.from, h.msg_id);
    pace();  // a cleared sender may just have delivered
  }
  return out;
}

void Inbox::answer_hello(const ReplyPath& in, NodeId from, uint64_t msg_id) {
  const bool awaited = pacing_.window > 0 && admission_.machine().awaits_knowledge_from(from);
  pace();
  if (awaited && !cleared_.count(from) && cleared_.size() >= pacing_.window) {
    auto it = std::find_if(paced_.begin(), paced_.end(), [&](const PacedHello& p) { return p.from == from; });
    if (it == paced_.end()) {
      if (tally_.hellos_paced++ == 0)
        say_.debug("pacing senders: " + std::to_string(pacing_.window) +
             " at a time send their knowledge, the others' hellos are acknowledged in turn");
      it = paced_.insert(paced_.end(), PacedHello{});
      it->since = Clock::now();
    }
    // The newest copy's connection: an older one may be gone.
    it->from = from;
    it->msg_id = msg_id;
    it->path = in;
    return;
  }
  if (send_ack(in, from, msg_id) && awaited) cleared_.emplace(from, Clock::now());
}

void Inbox::pace() {
  const auto now = Clock::now();
  for (auto it = cleared_.begin(); it != cleared_.end();)
    if (!admission_.machine().awaits_knowledge_from(it->first) || now - it->second >= pacing_.clearance) it = cleared_.erase(it);
    else ++it;
  // In turn while the window has room; out of turn a hello whose sender is no longer awaited, or
  // one that has waited longest_wait.
  for (auto it = paced_.begin(); it != paced_.end();) {
    const bool awaited = admission_.machine().awaits_knowledge_from(it->from);
    const bool turn = it == paced_.begin() && cleared_.size() < pacing_.window;
    if (awaited && !turn && now - it->since < pacing_.longest_wait) {
      ++it;
      continue;
    }
    // A sender whose connection is gone resends its hello on the next one, and queues again.
    if (send_ack(it->path, it->from, it->msg_id) && awaited) cleared_.emplace(it->from, now);
    it = paced_.erase(it);
  }
}

void Inbox::rejected(const Incoming& in, const RejectedMessage& e) {
  if (e.code == SecurityCode::Replayed && e.authenticated && e.header) {
    // A resend whose ack was lost (or a replay): it is stored already, so acknowledge it again
    // and use nothing from it.
    ++tally_.duplicates;
    if (e.header->type == MessageType::Hello) answer_hello(in, e.header->from, e.header->msg_id);
    else if (routed(e.header->type)) send_ack(in, e.header->from, e.header->msg_id);
    return;
  }
  count_rejection(to_string(e.code));
  say_rejection(std::string("rejected a frame") +
                (e.header ? " claiming to come from node " + std::to_string(e.header->from) : "") + ": " + e.what());
  if (e.authenticated && e.header && e.code == SecurityCode::MalformedPayload)
    // Its sender is authenticated: it is told what failed in its own bytes (a peer of another
    // implementation learns what to mend); a stranger is never answered.
    send_error(in, e.header->from, ErrorReason::Malformed, e.header->msg_id, false, e.what());
}

void Inbox::settle(const Incoming& in, const Message& msg) {
  const auto& h = msg.header;
  if (h.type == MessageType::Ack) {
    const Ack& ack = std::get<Ack>(msg.payload);
    const uint64_t acked = ack.acked_id;
    // It opens streams: seal the large messages for it as version 2, with the first cipher of
    // ours (fastest first) it lists.
    if (std::find(ack.versions.begin(), ack.versions.end(), kStreamVersion) != ack.versions.end())
      for (StreamCipher c : available_stream_ciphers())
        if (std::find(ack.ciphers.begin(), ack.ciphers.end(), to_string(c)) != ack.ciphers.end()) {
          if (stream_ciphers_.emplace(h.from, c).second)
            say_.debug(who_(h.from) + " opens protocol version 2: large messages to it go as streams (" + to_string(c) + ")");
          break;
        }
    if (outbox_.acknowledged(h.from, acked, h.msg_id)) {
      // Stored by now (Outbox::acknowledged): the receiver may stop waiting for a resend.
      send_receipt(in, h.from, h.msg_id);
      return;
    }
    const auto it = std::find_if(awaited_.begin(), awaited_.end(), [&](const AwaitedReceipt& a) {
      return a.from == h.from && std::find(a.ack_ids.begin(), a.ack_ids.end(), acked) != a.ack_ids.end();
    });
    // An ack naming an id this node never used, or one whose receipt came already, is ignored
    // (docs/protocol.md 5.4): a stray ack of a peer without receipts kept a node that took it for
    // a receipt waiting a minute at close for the receipts that peer never sends.
    if (it == awaited_.end()) return;
    awaited_.erase(it);
    sends_receipts_.insert(h.from);  // a peer of an older fednode, whose hello did not say so
    return;
  }
  const auto& err = std::get<ErrorMessage>(msg.payload);
  say_.warn(who_(h.from) + " reports " + to_string(err.reason) + (err.abort ? " and aborts" : "") + " about message " +
       std::to_string(err.ref_id) + ": " + printable(err.text));
  outbox_.refused(h.from, err.ref_id);
  admission_.machine().peer_refused(h.from);
}

void Inbox::send_receipt(const ReplyPath& in, NodeId to, uint64_t ack_id) {
  Ack receipt;
  receipt.acked_id = ack_id;
  std::string frame = channel_.seal(to, store_.next_msg_id(), Payload(receipt));
  if (!deliver(in, to, frame))
    // Its DEALER's one-frame queue was taken (the frame before it is still on its way): a receipt
    // dropped here left its receiver waiting for one that never came. The same frame is tried
    // again: it never went out, so its message id is still unused.
    unsent_receipts_.push_back({to, std::move(frame), in, Clock::now()});
}

void Inbox::receipts_again(const std::vector<std::pair<NodeId, uint64_t>>& acks) {
  for (const auto& [peer, ack_id] : acks) {
    ReplyPath own;
    own.via_dealer = peer;
    send_receipt(own, peer, ack_id);
  }
}

void Inbox::retry_receipts() {
  const auto now = Clock::now();
  for (auto it = unsent_receipts_.begin(); it != unsent_receipts_.end();) {
    const bool gone = deliver(it->path, it->to, it->frame) ||
                      std::chrono::duration<double>(now - it->since).count() >= kReceiptRetrySeconds;
    it = gone ? unsent_receipts_.erase(it) : std::next(it);
  }
}

// Acks and errors are answers: sealed like everything else, never stored or resent.
bool Inbox::send_ack(const ReplyPath& in, NodeId to, uint64_t acked) {
  // Awaited also when the ack cannot go out: the message is stored, and its sender, killed
  // between sending it and hearing of it, will resend it; the receipt then names the ack of the
  // resend (a kill the moment a message was stored ended its sender incomplete when its
  // receiver, having no ack to wait on, closed first).
  auto it = std::find_if(awaited_.begin(), awaited_.end(),
                         [&](const AwaitedReceipt& w) { return w.from == to && w.msg_id == acked; });
  if (it == awaited_.end()) {
    awaited_.push_back({});
    it = std::prev(awaited_.end());
    it->from = to;
    it->msg_id = acked;
  }
  const auto last = last_path_.find(to);
  if (last != last_path_.end() && last->second != in)
    // A new connection: the sender came back, and hears at once (remind) of everything of its
    // earlier process that still waits for a receipt.
    for (auto& a : awaited_)
      if (a.from == to) a.sender_returned = true;
  last_path_[to] = in;
  const uint64_t ack_id = answer(in, to, Payload(make_ack(to, acked)));
  if (ack_id == 0) {
    say_.debug("could not answer " + who_(to) + ": its connection is gone (it will resend)");
    return false;
  }
  it->ack_ids.push_back(ack_id);
  it->acked_at = Clock::now();
  it->sender_returned = false;
  return true;
}

std::vector<NodeId> Inbox::awaiting_receipts() const {
  std::set<NodeId> peers;
  for (const auto& a : awaited_)
    if (sends_receipts_.count(a.from)) peers.insert(a.from);
  return {peers.begin(), peers.end()};
}

void Inbox::remind(std::chrono::milliseconds reminder_interval) {
  const auto now = Clock::now();
  for (auto& a : awaited_)
    if (sends_receipts_.count(a.from) && (a.sender_returned || now - a.acked_at >= reminder_interval)) ack_again(a);
}

void Inbox::remind_returned() {
  for (auto& a : awaited_)
    if (a.sender_returned && sends_receipts_.count(a.from)) ack_again(a);
}

void Inbox::ack_again(AwaitedReceipt& a) {
  a.acked_at = Clock::now();
  a.sender_returned = false;
  // Quietly: the connection of a sender that died is gone, and its resend will come on a new one.
  if (const uint64_t id = answer(last_path_.at(a.from), a.from, Payload(make_ack(a.from, a.msg_id))))
    a.ack_ids.push_back(id);
}

void Inbox::send_error(const ReplyPath& in, NodeId to, ErrorReason reason, uint64_t ref, bool abort,
                       const std::string& text) {
  if (!channel_.knows(to)) return;
  ErrorMessage e;
  e.reason = reason;
  e.ref_id = ref;
  e.abort = abort;
  e.text = text.substr(0, 500);
  if (answer(in, to, Payload(e)) == 0) say_("could not answer " + who_(to) + ": its connection is gone");
}

uint64_t Inbox::answer(const ReplyPath& in, NodeId to, const Payload& p) {
  const uint64_t id = store_.next_msg_id();
  return deliver(in, to, channel_.seal(to, id, p)) ? id : 0;
}

bool Inbox::deliver(const ReplyPath& in, NodeId to, const std::string& frame) {
  if (!transport_.reply(in, frame)) return false;
  tally_.bytes_answered += static_cast<int64_t>(frame.size());
  tally_.links[to].sent += static_cast<int64_t>(frame.size());
  return true;
}

void Inbox::count_rejection(const std::string& reason) {
  ++tally_.frames_rejected;
  ++tally_.rejected_by[reason];
}

void Inbox::say_rejection(const std::string& line) {
  if (std::chrono::duration<double>(Clock::now() - rejection_window_).count() >= kRejectionWindow) {
    say_rejections_left_out();
    rejection_window_ = Clock::now();
    rejections_said_ = 0;
  }
  if (rejections_said_ < kRejectionLines) {
    ++rejections_said_;
    say_.warn(line);
  } else {
    ++rejections_unsaid_;
  }
}

void Inbox::say_rejections_left_out() {
  if (rejections_unsaid_ == 0) return;
  say_.warn("... and " + std::to_string(rejections_unsaid_) + " more rejected frames, not logged one by one");
  rejections_unsaid_ = 0;
}

}  // namespace fednode
