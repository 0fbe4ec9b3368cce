#include "cli/topology_picture.h"

#include "topology/reach.h"

#include <cstdio>
#include <filesystem>

namespace fednode::cli {

std::string state_class(const std::string& s) {
  if (s.empty()) return "";
  if (s == "finished") return "done";
  if (s == "running" || s == "not responding") return "running";
  if (s == "not started") return "not started";
  return "failed";
}

std::string state_colour(const std::string& c) {
  if (c == "done") return "#b8e0b0";
  if (c == "running") return "#b5d3f0";
  if (c == "failed") return "#f2b0a8";
  if (c == "not started") return "#e4e4e4";
  return "#ffffff";
}

namespace {

// Names the relay an edge between two unreachable nodes goes through (topology/reach.h).
void relayed(const Topology& t, PictureEdge& e) {
  const TopologyNode* from = t.find(e.from);
  const TopologyNode* to = t.find(e.to);
  if (!from || !to || from->reachable || to->reachable) return;
  try {
    e.via = reach(t, e.from, e.to).relays.front()->name;
    e.label += (e.label.empty() ? "via " : ", via ") + e.via;
  } catch (const InputError&) {
    e.label += e.label.empty() ? "no relay" : ", no relay";
  }
}

}  // namespace

TopologyPicture picture_of(const Topology& t, const std::string& title) {
  TopologyPicture p;
  p.title = title;
  p.mode = t.federation.mode;
  p.hub = t.federation.hub;
  p.start = t.federation.start;
  for (NodeId id : t.ids()) {
    const TopologyNode& n = t.node(id);
    PictureNode pn;
    pn.id = id;
    pn.lines.push_back(n.name.empty() ? "node " + std::to_string(id) : n.name + " (" + std::to_string(id) + ")");
    if (!n.address.empty()) pn.lines.push_back(n.address);
    if (!n.reachable) pn.lines.push_back("accepts no connections");
    p.nodes.push_back(std::move(pn));
  }
  for (const TopologyRelay& r : t.relays) p.relays.emplace_back(r.name, r.address);
  for (const TopologyEdge& e : t.edges) {
    PictureEdge pe;
    pe.from = e.from;
    pe.to = e.to;
    pe.feedback = e.feedback;
    if (e.feedback) pe.label = "feedback";
    relayed(t, pe);
    p.edges.push_back(pe);
  }
  if (p.mode == TopologyMode::Star && p.hub) {
    for (const TopologyEdge& e : t.edges) {
      if (e.to != *p.hub) continue;
      PictureEdge head;
      head.from = *p.hub;
      head.to = e.from;
      head.implied = true;
      head.label = "head";
      relayed(t, head);
      p.edges.push_back(head);
    }
  }
  return p;
}

std::string bytes_text(long long bytes) {
  char b[32];
  if (bytes < 1000) std::snprintf(b, sizeof b, "%lld B", bytes);
  else if (bytes < 1000000) std::snprintf(b, sizeof b, "%.1f kB", bytes / 1e3);
  else if (bytes < 1000000000) std::snprintf(b, sizeof b, "%.2f MB", bytes / 1e6);
  else std::snprintf(b, sizeof b, "%.2f GB", bytes / 1e9);
  return b;
}

void add_states(TopologyPicture& p, const Topology& t, const std::vector<NodeView>& views) {
  std::error_code ec;
  bool any = false;
  for (NodeId id : t.ids()) any = any || std::filesystem::is_directory(t.state_dir_of(id), ec);
  if (!any) return;
  p.has_state = true;
  for (const NodeView& v : views) {
    for (PictureNode& n : p.nodes) {
      if (n.id != v.id) continue;
      n.state = v.state;
      n.state_class = state_class(v.state);
      std::string line = v.state;
      if (v.accuracy) {
        char a[32];
        std::snprintf(a, sizeof a, ", accuracy %.4f", *v.accuracy);
        line += a;
      }
      n.lines.push_back(line);
      if (v.bytes_sent || v.bytes_received)
        n.lines.push_back("sent " + std::to_string(v.bytes_sent) + " B, received " + std::to_string(v.bytes_received) + " B");
    }
  }
  // Each edge with what its first node sent along it (the knowledge, or the head, and resends).
  for (PictureEdge& e : p.edges)
    for (const NodeView& v : views) {
      if (v.id != e.from) continue;
      for (const auto& l : v.links)
        if (l.peer == static_cast<long>(e.to) && l.sent > 0) {
          e.bytes_sent = l.sent;
          e.label += (e.label.empty() ? "" : ", ") + bytes_text(l.sent);
        }
    }
}

}  // namespace fednode::cli
