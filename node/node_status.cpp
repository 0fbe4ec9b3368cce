#include "node/node_status.h"

#include "core/json_writer.h"
#include "core/types.h"
#include "node/durable_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fednode {

std::string standing_json(const NodeStanding& s) {
  std::ostringstream out;
  JsonWriter w(out);
  w.begin_object();
  w.key("id").value(s.id);
  w.key("name").value(s.name);
  w.key("pid").value(static_cast<int64_t>(s.pid));
  w.key("updated_unix").value(s.updated_unix);
  w.key("stage").value(s.stage);
  w.key("awaiting").array(s.awaiting);
  w.key("deadline_in_seconds");
  if (s.deadline_in_seconds) w.value(*s.deadline_in_seconds);
  else w.null();
  w.key("accepted").begin_array();
  for (const auto& [from, type] : s.accepted) w.begin_object().key("from").value(from).key("type").value(type).end_object();
  w.end_array();
  w.key("unacknowledged").array(s.unacknowledged);
  w.key("bytes_sent").value(s.bytes_sent);
  w.key("bytes_received").value(s.bytes_received);
  write_links(w, s.links);
  w.key("frames_rejected").value(s.frames_rejected);
  w.key("last_line").value(s.last_line);
  w.end_object();
  return out.str();
}

void write_standing(const std::string& path, const NodeStanding& s) { replace_file_at_once(path, standing_json(s)); }

}  // namespace fednode
