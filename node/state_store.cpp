#include "node/state_store.h"

#include "methods/heads/head.h"
#include "node/durable_file.h"

#include <sodium.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace fs = std::filesystem;

namespace fednode {
namespace {

constexpr uint64_t kIdBlock = 256;
constexpr size_t kChecksumBytes = 16;
constexpr uint8_t kRecordVersion = 1;
// 2: with the payload's counted bytes; 3: the payload, sealed at each send (no longer the frame)
constexpr uint8_t kOutboxRecordVersion = 3;

void put_u8(std::string& s, uint8_t v) { s.push_back(static_cast<char>(v)); }
void put_le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string checksum(std::string_view bytes) {
  std::string out(kChecksumBytes, '\0');
  crypto_generichash(reinterpret_cast<unsigned char*>(out.data()), out.size(),
                     reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), nullptr, 0);
  return out;
}

std::string seal_record(std::string body) {
  body += checksum(body);
  return body;
}

// Reads the fixed-layout records written above; every read is bounds-checked against the
// file, and the checksum is verified first, so a damaged file gives one clear error.
class RecordReader {
 public:
  RecordReader(const std::string& bytes, const std::string& where, const char magic[4],
               uint8_t version = kRecordVersion)
      : where_(where) {
    if (bytes.size() < 4 + 1 + kChecksumBytes || bytes.compare(0, 4, magic, 4) != 0)
      fail("not a fednode state record");
    body_ = std::string_view(bytes).substr(0, bytes.size() - kChecksumBytes);
    if (checksum(body_) != bytes.substr(bytes.size() - kChecksumBytes)) fail("checksum mismatch (damaged file)");
    pos_ = 4;
    if (u8() != version) fail("unknown record version (written by another version of fednode?)");
  }
  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint64_t le(int bytes) {
    const auto s = take(static_cast<size_t>(bytes));
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[static_cast<size_t>(i)]);
    return v;
  }
  void expect_end() const {
    if (pos_ != body_.size()) fail("unexpected bytes after the record");
  }
  std::string rest() {
    std::string r(body_.substr(pos_));
    pos_ = body_.size();
    return r;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError("state file '" + where_ + "': " + why + "; remove the node's state directory to start over");
  }

 private:
  std::string_view take(size_t n) {
    if (body_.size() - pos_ < n) fail("truncated record");
    const auto s = body_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string where_;
  std::string_view body_;
  size_t pos_ = 0;
};

MessageType message_type(uint8_t v, const RecordReader& r) {
  if (v < 1 || v > 6) r.fail("unknown message type " + std::to_string(v));
  return static_cast<MessageType>(v);
}

std::vector<std::string> files_with_suffix(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string seq_name(uint64_t seq) {
  char b[32];
  std::snprintf(b, sizeof b, "%010" PRIu64, seq);
  return b;
}

}  // namespace

StateStore::StateStore(std::string dir, const RunId& run, uint64_t max_file_bytes)
    : dir_(std::move(dir)), max_file_bytes_(max_file_bytes) {
  std::error_code ec;
  for (const char* sub : {"", "/inbox", "/outbox"}) {
    fs::create_directories(dir_ + sub, ec);
    if (ec) throw InputError("cannot create state directory '" + dir_ + sub + "': " + ec.message());
  }
  // Before anything in the directory is read or written: two nodes on one directory would hand
  // out the same message ids and overwrite each other's inbox, outbox and head.
  lock_.fd = ::open(path("lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_.fd < 0) throw InputError("cannot open '" + path("lock") + "': " + std::strerror(errno));
  if (::flock(lock_.fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK)
      throw InputError("state directory '" + dir_ + "' is in use by another node (a running fednode, or another "
                       "Node in this process): every node needs a state directory of its own");
    // A file system without locks (some network mounts) still works, unguarded.
    if (err != ENOLCK && err != EOPNOTSUPP)
      throw InputError("cannot lock '" + path("lock") + "': " + std::strerror(err));
  }
  const std::string run_file = path("run");
  if (fs::exists(run_file)) {
    std::string stored = read_file_bounded(run_file, 1024);
    while (!stored.empty() && (stored.back() == '\n' || stored.back() == ' ')) stored.pop_back();
    if (stored != run.to_hex()) {
      // The file's bytes reach the message only when they look like a run id.
      const bool hex = stored.size() == run.to_hex().size() &&
                       stored.find_first_not_of("0123456789abcdef") == std::string::npos;
      if (!hex) throw InputError("state file '" + run_file + "' is damaged; remove the node's state directory to start over");
      throw InputError("state directory '" + dir_ + "' belongs to run " + stored + ", not to this run (" +
                       run.to_hex() + "): give this run a fresh state directory, or remove the old one");
    }
  } else {
    write_file_durably(run_file, run.to_hex() + "\n");
  }
  if (fs::exists(path("msg_ids"))) {
    // Checksummed: a damaged value could hand out ids again that receivers have seen already.
    const std::string bytes = read_file_bounded(path("msg_ids"), 64);
    RecordReader r(bytes, path("msg_ids"), "FNID");
    const uint64_t v = r.le(8);
    r.expect_end();
    // Ids are 64-bit and a run hands out far fewer than 2^62: beyond, reserving would wrap.
    if (v == 0 || v > (uint64_t{1} << 62)) r.fail("implausible message id " + std::to_string(v));
    id_next_ = v;  // everything below may have been used before the restart
  }
  id_reserved_ = id_next_;
}

StateStore::HeldLock::~HeldLock() {
  if (fd >= 0) ::close(fd);  // releases the lock
}

uint64_t StateStore::next_msg_id() {
  if (id_next_ >= id_reserved_) {
    id_reserved_ = id_next_ + kIdBlock;
    std::string body = "FNID";
    put_u8(body, kRecordVersion);
    put_le(body, id_reserved_, 8);
    write_file_durably(path("msg_ids"), seal_record(std::move(body)));
  }
  return id_next_++;
}

ReplayGuard StateStore::load_replay() const {
  if (!fs::exists(path("replay"))) return {};
  return ReplayGuard::deserialize(read_file_bounded(path("replay"), max_file_bytes_), path("replay"));
}

void StateStore::save_replay(const ReplayGuard& guard) { write_file_durably(path("replay"), guard.serialize()); }

void StateStore::store_received(NodeId from, uint64_t msg_id, MessageType type, std::string_view plaintext) {
  std::string body = "FNIN";
  body.reserve(body.size() + 14 + plaintext.size() + kChecksumBytes);  // no regrowth for large payloads
  put_u8(body, kRecordVersion);
  put_u8(body, static_cast<uint8_t>(type));
  put_le(body, from, 4);
  put_le(body, msg_id, 8);
  body += plaintext;
  char name[64];
  std::snprintf(name, sizeof name, "inbox/%010u-%020" PRIu64 ".msg", from, msg_id);
  write_file_durably(path(name), seal_record(std::move(body)));
}

std::vector<StoredMessage> StateStore::received() const {
  std::vector<StoredMessage> out;
  for (const auto& name : files_with_suffix(path("inbox"), ".msg")) {
    const std::string where = path("inbox/" + name);
    const std::string bytes = read_file_bounded(where, max_file_bytes_);
    RecordReader r(bytes, where, "FNIN");
    StoredMessage m;
    m.type = message_type(r.u8(), r);
    m.from = static_cast<NodeId>(r.le(4));
    m.msg_id = r.le(8);
    m.plaintext = r.rest();
    out.push_back(std::move(m));
  }
  return out;
}

std::string StateStore::outbox_name(const OutboxEntry& e) const { return "outbox/" + seq_name(e.seq); }

void StateStore::store_outgoing(const OutboxEntry& e) {
  std::string body = "FNOB";
  put_u8(body, kOutboxRecordVersion);
  put_u8(body, static_cast<uint8_t>(e.type));
  put_u8(body, static_cast<uint8_t>(e.phase));
  put_le(body, e.to, 4);
  put_le(body, e.msg_id, 8);
  put_le(body, e.seq, 8);
  put_le(body, static_cast<uint64_t>(e.counted_bytes), 8);
  body += e.frame;
  write_file_durably(path(outbox_name(e) + ".frame"), seal_record(std::move(body)));
}

void StateStore::mark_acked(const OutboxEntry& e) {
  write_file_durably(path(outbox_name(e) + ".acked"), e.ack_id ? std::to_string(e.ack_id) + "\n" : "");
}
void StateStore::mark_failed(const OutboxEntry& e) { write_file_durably(path(outbox_name(e) + ".failed"), ""); }
void StateStore::mark_given_up(const OutboxEntry& e) { write_file_durably(path(outbox_name(e) + ".given_up"), ""); }

namespace {

// What mark_acked wrote: empty, or the ack's message id and a newline.
uint64_t read_ack_id(const std::string& where, uint64_t max_file_bytes) {
  const std::string text = read_file_bounded(where, std::min<uint64_t>(max_file_bytes, 32));
  if (text.empty()) return 0;
  const bool digits = text.size() >= 2 && text.size() <= 21 && text.back() == '\n' &&
                      text.find_first_not_of("0123456789") == text.size() - 1;
  errno = 0;
  const uint64_t id = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE || id == 0)
    throw InputError("state file '" + where + "': expected an acknowledgement's message id; remove the node's "
                     "state directory to start over");
  return id;
}

OutboxEntry read_outbox_record(const std::string& where, uint64_t max_file_bytes) {
  const std::string bytes = read_file_bounded(where, max_file_bytes);
  RecordReader r(bytes, where, "FNOB", kOutboxRecordVersion);
  OutboxEntry e;
  e.type = message_type(r.u8(), r);
  e.phase = r.u8();
  e.to = static_cast<NodeId>(r.le(4));
  e.msg_id = r.le(8);
  e.seq = r.le(8);
  e.counted_bytes = static_cast<int64_t>(r.le(8));
  if (e.counted_bytes < 0) r.fail("negative byte count");
  e.frame = r.rest();
  return e;
}

}  // namespace

std::vector<OutboxEntry> StateStore::outbox() const {
  std::vector<OutboxEntry> out;
  for (const auto& name : files_with_suffix(path("outbox"), ".frame")) {
    const std::string where = path("outbox/" + name);
    OutboxEntry e = read_outbox_record(where, max_file_bytes_);
    const std::string stem = path(outbox_name(e));
    if (stem + ".frame" != where)
      throw InputError("state file '" + where + "': sequence number does not match the file name; remove the "
                       "node's state directory to start over");
    e.acked = fs::exists(stem + ".acked");
    if (e.acked) e.ack_id = read_ack_id(stem + ".acked", max_file_bytes_);
    e.failed = fs::exists(stem + ".failed");
    e.given_up = fs::exists(stem + ".given_up");
    out.push_back(std::move(e));
  }
  return out;
}

std::string StateStore::outgoing_frame(const OutboxEntry& e) const {
  const std::string where = path(outbox_name(e) + ".frame");
  OutboxEntry stored = read_outbox_record(where, max_file_bytes_);
  if (stored.seq != e.seq || stored.msg_id != e.msg_id || stored.to != e.to)
    throw InputError("state file '" + where + "': holds another frame than the one the outbox is sending; "
                     "remove the node's state directory to start over");
  return std::move(stored.frame);
}

void StateStore::drop_outgoing(int phase) {
  for (const auto& e : outbox())
    if (e.phase == phase)
      for (const char* suffix : {".frame", ".acked", ".failed", ".given_up"}) fs::remove(path(outbox_name(e) + suffix));
}

uint64_t StateStore::next_seq() const {
  const auto names = files_with_suffix(path("outbox"), ".frame");
  if (names.empty()) return 1;
  return std::strtoull(names.back().c_str(), nullptr, 10) + 1;
}

int StateStore::count_start() {
  int before = 0;
  if (fs::exists(path("starts"))) {
    const std::string text = read_file_bounded(path("starts"), 64);
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || (*end != '\n' && *end != '\0') || errno == ERANGE || v < 1 || v > INT_MAX - 1)
      throw InputError("state file '" + path("starts") + "' is damaged");
    before = static_cast<int>(v);
  }
  write_file_durably(path("starts"), std::to_string(before + 1) + "\n");
  return before;
}

bool StateStore::started_before() const { return fs::exists(path("starts")); }

bool StateStore::has_marker(const std::string& name) const { return fs::exists(path(name)); }
void StateStore::set_marker(const std::string& name) { write_file_durably(path(name), ""); }

void StateStore::save_head(const Head& head, const Contributors& contributors) {
  std::ostringstream saved;
  head.save(saved);
  const std::string head_bytes = saved.str();
  // One checksummed record holds the head and whose data it holds, so that neither can be
  // damaged or left behind by a crash between two writes without the restart noticing.
  std::string body = "FNHD";
  put_u8(body, kRecordVersion);
  put_le(body, contributors.size(), 4);
  for (NodeId id : contributors) put_le(body, id, 4);
  body += head_bytes;
  write_file_durably(path("head.state"), seal_record(std::move(body)));
  // The head with its card, for `fednode predict` and applications (docs/embedding.md).
  head_card_.contributors = contributors;
  write_file_durably(path("head"), head_file_bytes(head, head_card_));
}

void StateStore::save_personal_head(const Head& head) {
  HeadCard card = head_card_;  // its contributors: those of the global head it was fitted beside
  card.personal = true;
  write_file_durably(path("personal_head"), head_file_bytes(head, card));
}

std::unique_ptr<Head> StateStore::load_head(Contributors* contributors) {
  const std::string where = path("head.state");
  if (!fs::exists(where)) return nullptr;
  const std::string bytes = read_file_bounded(where, max_file_bytes_);
  RecordReader r(bytes, where, "FNHD");
  contributors->clear();
  const uint64_t n = r.le(4);
  if (n == 0 || n > (bytes.size() / 4)) r.fail("implausible contributor count " + std::to_string(n));
  for (uint64_t i = 0; i < n; ++i) {
    const auto id = static_cast<NodeId>(r.le(4));
    // Written from a set: ascending, each once.
    if (!contributors->empty() && id <= *contributors->rbegin()) r.fail("contributors out of order");
    contributors->insert(id);
  }
  const std::string head_bytes = r.rest();
  std::istringstream in(head_bytes);
  auto head = Head::load(in, where);
  if (in.peek() != std::char_traits<char>::eof()) r.fail("unexpected bytes after the head");
  // A crash between the two writes of save_head leaves the applications' copy one head behind.
  head_card_.contributors = *contributors;
  const std::string file = head_file_bytes(*head, head_card_);
  std::error_code ec;
  if (!fs::is_regular_file(path("head"), ec) || fs::file_size(path("head"), ec) != file.size() ||
      read_file_bounded(path("head"), file.size()) != file)
    write_file_durably(path("head"), file);
  return head;
}

void StateStore::write_text(const std::string& name, const std::string& text) { write_file_durably(path(name), text); }

std::optional<std::string> StateStore::read_text(const std::string& name, uint64_t max_bytes) const {
  if (!fs::exists(path(name))) return std::nullopt;
  return read_file_bounded(path(name), max_bytes);
}

}  // namespace fednode
