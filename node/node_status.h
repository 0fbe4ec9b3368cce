// status.json: where a running node stands, for people watching it (fednode status, fednode
// launch's live table). The node rewrites it in its state directory about once a second while it
// runs; result.json replaces it as the word on a node that ended (docs/node.md, "status.json").
#pragma once

#include "node/link_bytes.h"
#include "core/contributors.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fednode {

struct NodeStanding {
  NodeId id = 0;
  std::string name;
  long pid = 0;                // the node's process: `fednode status` tells a stopped node by it
  double updated_unix = 0;     // seconds since 1970 when this was written
  std::string stage;           // "phase 1", "phase 2" or "plan done" (sending, waiting for acks)
  std::vector<NodeId> awaiting;                 // senders the current stage still waits for
  std::optional<double> deadline_in_seconds;    // until it gives up on them (negative: passing now)
  std::vector<std::pair<NodeId, std::string>> accepted;  // every message its plan took: from, type
  std::vector<NodeId> unacknowledged;           // peers that have not acknowledged a send yet
  int64_t bytes_sent = 0, bytes_received = 0;
  LinkTally links;             // the same by peer
  int64_t frames_rejected = 0;
  std::string last_line;       // the last line the node said (its node.log's last line)
};

std::string standing_json(const NodeStanding& s);
// Replaces `path` at once (a temporary file renamed over it), so a reader sees the old or the new
// text, never half; not synced to disk: a status that a crash loses is rewritten a second later.
void write_standing(const std::string& path, const NodeStanding& s);

}  // namespace fednode
