#include "node/metrics_file.h"

#include <map>
#include <sstream>

namespace fednode {
namespace {

// Label values may hold any text; the format escapes backslash, double quote and newline.
std::string escaped(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

class Exposition {
 public:
  explicit Exposition(const NodeStanding& s)
      : labels_("node=\"" + escaped(s.name) + "\",id=\"" + std::to_string(s.id) + "\"") {}

  // One metric family: its HELP and TYPE lines once, then its samples.
  Exposition& family(const std::string& name, const char* type, const std::string& help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    name_ = name;
    return *this;
  }
  template <typename T>
  Exposition& sample(T value, const std::string& extra_labels = "") {
    out_ << name_ << "{" << labels_ << (extra_labels.empty() ? "" : "," + extra_labels) << "} " << value << "\n";
    return *this;
  }
  std::string text() const { return out_.str(); }

 private:
  std::string labels_;
  std::string name_;
  std::ostringstream out_;
};

std::string label(const char* key, const std::string& value) { return std::string(key) + "=\"" + escaped(value) + "\""; }

}  // namespace

std::string prometheus_metrics(const NodeStanding& s, const NodeResult& r) {
  Exposition e(s);
  e.family("fednode_status", "gauge", "1 for the node's status: running, finished, incomplete or stopped.")
      .sample(1, label("status", to_string(r.status)));
  e.family("fednode_stage", "gauge", "1 for the stage the node is in: phase 1, phase 2 or plan done.")
      .sample(1, label("stage", s.stage));
  e.family("fednode_awaited_peers", "gauge", "Senders the current stage still waits for.").sample(s.awaiting.size());
  if (s.deadline_in_seconds)
    e.family("fednode_deadline_seconds", "gauge", "Seconds until the node gives up on the senders it waits for.")
        .sample(*s.deadline_in_seconds);
  e.family("fednode_unacknowledged_peers", "gauge", "Peers that have not acknowledged a send yet.")
      .sample(s.unacknowledged.size());
  e.family("fednode_bytes_sent_total", "counter", "Bytes of frames sent, resends and acknowledgements included.")
      .sample(r.bytes_sent);
  e.family("fednode_bytes_received_total", "counter", "Bytes of frames received.").sample(r.bytes_received);
  e.family("fednode_link_bytes_sent_total", "counter", "Bytes of frames sent to each peer (node/link_bytes.h).");
  for (const auto& [peer, bytes] : r.links) e.sample(bytes.sent, label("peer", std::to_string(peer)));
  e.family("fednode_link_bytes_received_total", "counter", "Bytes of frames that authenticated as each peer's.");
  for (const auto& [peer, bytes] : r.links) e.sample(bytes.received, label("peer", std::to_string(peer)));
  e.family("fednode_messages_sent_total", "counter", "Messages sent (knowledge, heads, hellos).").sample(r.messages_sent);
  e.family("fednode_messages_received_total", "counter", "Messages accepted, duplicates included.")
      .sample(r.messages_received);
  std::map<std::string, int> accepted;
  for (const auto& [from, type] : s.accepted) ++accepted[type];
  e.family("fednode_plan_messages_taken_total", "counter", "Messages the node's plan took, by type.");
  for (const auto& [type, n] : accepted) e.sample(n, label("type", type));
  e.family("fednode_resends_total", "counter", "Frames sent again after no acknowledgement.").sample(r.resends);
  e.family("fednode_duplicates_total", "counter", "Authentic repeats: acknowledged again, not used.").sample(r.duplicates);
  e.family("fednode_streams_abandoned_total", "counter",
           "Incoming streams dropped unfinished: replaced by their sender, stalled, or left at close.")
      .sample(r.streams_abandoned);
  e.family("fednode_frames_rejected_total", "counter", "Frames refused, by reason (docs/node.md).");
  for (const auto& [reason, n] : r.frames_rejected_by) e.sample(n, label("reason", reason));
  e.family("fednode_seconds_total", "counter", "Seconds spent waiting for peers, merging knowledge and fitting heads.")
      .sample(r.seconds_waiting, label("activity", "waiting"))
      .sample(r.seconds_merge, label("activity", "merge"))
      .sample(r.seconds_head, label("activity", "head"));
  e.family("fednode_last_update_timestamp_seconds", "gauge", "When this file was written (Unix time).")
      .sample(static_cast<int64_t>(s.updated_unix));
  return e.text();
}

}  // namespace fednode
