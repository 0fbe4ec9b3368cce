#include "node/link_bytes.h"

#include "core/json_writer.h"

namespace fednode {

void write_links(JsonWriter& w, const LinkTally& links) {
  w.key("links").begin_array();
  for (const auto& [peer, bytes] : links)
    w.begin_object().key("peer").value(peer).key("sent").value(bytes.sent).key("received").value(bytes.received).end_object();
  w.end_array();
}

}  // namespace fednode
