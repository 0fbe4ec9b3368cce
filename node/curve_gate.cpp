#include "node/curve_gate.h"

#include "node/socket_options.h"

#include <cstring>
#include <vector>

namespace fednode {
namespace {

// libzmq asks the ZAP handler bound at this inproc address of the socket's context (RFC 27).
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
// Distinct refused keys whose refusals are counted one by one; past it, all are counted together.
constexpr size_t kMaxTrackedRefusedKeys = 256;

bool power_of_ten(int64_t n) {
  while (n >= 10 && n % 10 == 0) n /= 10;
  return n == 1;
}

// Peers choose what a ZAP request carries (their address); logs get printable ASCII only.
std::string printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 100)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

}  // namespace

CurveGate::CurveGate(zmq::context_t& context, const std::map<NodeId, PublicKey>& allowed,
                     std::function<void(const std::string&)> log)
    : socket_(context, zmq::socket_type::rep), log_(std::move(log)) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind(kZapEndpoint);
  for (const auto& [id, key] : allowed) allowed_.emplace(key, id);
}

void CurveGate::answer_waiting() {
  while (socket_.get(zmq::sockopt::events) & ZMQ_POLLIN) answer_one();
}

// One request: version, request id, domain, address, routing id, mechanism, then the mechanism's
// credentials (CURVE: the client's 32-byte long-term public key).
void CurveGate::answer_one() {
  const std::vector<zmq::message_t> parts = read_whole_message(socket_);
  if (parts.empty()) return;
  auto text = [&](size_t i) { return i < parts.size() ? parts[i].to_string() : std::string(); };
  const std::string request_id = text(1), address = printable(text(3));
  std::string status = "400", reason, user;
  std::optional<PublicKey> key;
  if (parts.size() == 7 && parts[6].size() == kKeyBytes) {
    key.emplace();
    std::memcpy(key->bytes.data(), parts[6].data(), kKeyBytes);
  }
  if (parts.size() < 6 || text(0) != "1.0") {
    reason = "malformed ZAP request";
  } else if (text(2) != kCurveZapDomain || text(5) != "CURVE" || !key) {
    reason = "only CURVE clients of domain " + std::string(kCurveZapDomain) + " are admitted";
  } else if (const auto it = allowed_.find(*key); it != allowed_.end()) {
    status = "200";
    reason = "OK";
    user = std::to_string(it->second);
  } else {
    reason = "public key not in the topology";
  }
  if (status != "200") note_refusal(key, address, reason);
  const std::string reply[] = {"1.0", request_id, status, reason, user, ""};
  for (size_t i = 0; i < 6; ++i)
    socket_.send(zmq::buffer(reply[i]), i + 1 < 6 ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

void CurveGate::note_refusal(const std::optional<PublicKey>& key, const std::string& address, const std::string& reason) {
  ++refusals_;
  int64_t n = 0;
  if (key && (refused_by_key_.count(*key) || refused_by_key_.size() < kMaxTrackedRefusedKeys))
    n = ++refused_by_key_[*key];
  else
    n = ++refused_untracked_;
  if (!log_ || !power_of_ten(n)) return;
  const std::string who = key ? "key " + key->to_hex() : "no usable key";
  log_("CurveZMQ: refused a connection from " + (address.empty() ? std::string("?") : address) + " (" + who + "): " +
       reason + (n > 1 ? " (" + std::to_string(n) + " times so far)" : ""));
}

}  // namespace fednode
