// Bytes per link: what a node sent to and received from each peer, as `fednode status`, result.json
// and the topology picture show them (docs/node.md, "Result"). Frames as they travel (sealed,
// resends and acknowledgements included). Received bytes count for a peer once a frame (or a
// stream's first message) authenticated as that peer's; a frame that never did counts only in the
// node's total, since nothing says whose it was.
#pragma once

#include "core/contributors.h"

#include <cstdint>
#include <map>

namespace fednode {

struct LinkBytes {
  int64_t sent = 0, received = 0;
};
using LinkTally = std::map<NodeId, LinkBytes>;

class JsonWriter;
// "links": [{"peer": 1, "sent": 2525607, "received": 376}, ...], ascending peers: result.json's
// and status.json's form.
void write_links(JsonWriter& w, const LinkTally& links);

}  // namespace fednode
