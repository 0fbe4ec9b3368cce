#include "cli/status_view.h"

#include "topology/reach.h"

#include "core/json_writer.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace fs = std::filesystem;

namespace fednode::cli {
namespace {

// A status.json older than this, from a process that is still there, means a node stuck in one
// long step (merging, fitting) or hung: it says so rather than "running".
constexpr double kSilentAfter = 10.0;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double mtime_unix(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
}

std::optional<nlohmann::json> read_json_file(const fs::path& p, std::string& problem) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.is_object()) return j;
    problem = p.string() + " is not a JSON object";
  } catch (const nlohmann::json::exception& e) {
    problem = p.string() + " is not valid JSON (a node writing it right now?): " + e.what();
  }
  return std::nullopt;
}

std::vector<long> ids(const nlohmann::json& j, const char* key) {
  std::vector<long> out;
  const auto it = j.find(key);
  if (it != j.end() && it->is_array())
    for (const auto& v : *it)
      if (v.is_number_integer()) out.push_back(v.get<long>());
  return out;
}

std::string text(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

long long number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<long long>() : 0;
}

std::vector<NodeView::Link> links(const nlohmann::json& j) {
  std::vector<NodeView::Link> out;
  const auto it = j.find("links");
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& l : *it)
    if (l.is_object()) out.push_back({static_cast<long>(number(l, "peer")), number(l, "sent"), number(l, "received")});
  return out;
}

bool process_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }


}  // namespace

std::string compact_ids(const std::vector<long>& v) {
  if (v.empty()) return "-";
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(v[i]) + (j > i ? "-" + std::to_string(v[j]) : "");
    i = j + 1;
  }
  return s;
}

std::vector<NodeView> read_node_views(const Topology& topology) {
  std::vector<NodeView> views;
  const double now = unix_now();
  for (NodeId id : topology.ids()) {
    NodeView v;
    v.id = id;
    const auto& n = topology.node(id);
    v.label = n.name.empty() ? std::to_string(id) : n.name;
    const fs::path dir = topology.state_dir_of(id);
    const auto status = read_json_file(dir / "status.json", v.problem);
    const auto result = read_json_file(dir / "result.json", v.problem);
    const double updated = status ? (*status).value("updated_unix", 0.0) : 0.0;
    // A result written after the last status is this run's word; an older one is an earlier
    // run's, which a node started again is about to replace.
    if (result && (!status || mtime_unix(dir / "result.json") + 1.0 >= updated)) {
      v.state = text(*result, "status");
      v.contributors = ids(*result, "contributors");
      v.missing = ids(*result, "missing");
      v.refused_by = ids(*result, "refused_by");
      v.unacknowledged = ids(*result, "unacknowledged");
      const auto acc = result->find("accuracy");
      if (acc != result->end() && acc->is_number() && acc->get<double>() >= 0) v.accuracy = acc->get<double>();
      v.bytes_sent = number(*result, "bytes_sent");
      v.bytes_received = number(*result, "bytes_received");
      v.links = links(*result);
    } else if (status) {
      v.pid = static_cast<long>(number(*status, "pid"));
      const double age = now - updated;
      v.state = !process_alive(v.pid) ? "stopped" : age > kSilentAfter ? "not responding" : "running";
      v.stage = text(*status, "stage");
      v.awaiting = ids(*status, "awaiting");
      const auto d = status->find("deadline_in_seconds");
      if (d != status->end() && d->is_number() && v.state != "stopped") v.deadline_in_seconds = d->get<double>() - age;
      const auto acc = status->find("accepted");
      if (acc != status->end() && acc->is_array())
        for (const auto& a : *acc)
          if (a.is_object()) v.accepted.push_back(text(a, "type") + " from " + std::to_string(number(a, "from")));
      v.unacknowledged = ids(*status, "unacknowledged");
      v.bytes_sent = number(*status, "bytes_sent");
      v.bytes_received = number(*status, "bytes_received");
      v.links = links(*status);
      v.last_line = text(*status, "last_line");
    } else {
      v.state = "not started";
    }
    views.push_back(std::move(v));
  }
  return views;
}

bool every_node_ended(const std::vector<NodeView>& views) {
  for (const auto& v : views)
    if (v.state == "running" || v.state == "not responding" || v.state == "not started") return false;
  return true;
}

std::string status_table(const std::vector<NodeView>& views) {
  std::ostringstream out;
  char line[640];
  std::snprintf(line, sizeof line, "%-10s %-15s %-10s %-12s %11s %-12s %12s %12s  %s\n", "node", "state", "stage",
                "waiting for", "deadline in", "unacked by", "bytes sent", "bytes recv", "last");
  out << line;
  for (const auto& v : views) {
    std::string deadline = "-";
    if (v.deadline_in_seconds) deadline = std::to_string(static_cast<long>(*v.deadline_in_seconds)) + " s";
    std::string last = v.last_line;
    if (!v.problem.empty()) last = v.problem;
    else if (v.accuracy) {
      char a[96];
      std::snprintf(a, sizeof a, "accuracy %.4f, contributors %s", *v.accuracy, compact_ids(v.contributors).c_str());
      last = a;
      if (!v.missing.empty()) last += ", missing " + compact_ids(v.missing);
      if (!v.refused_by.empty()) last += ", refused by " + compact_ids(v.refused_by);
    }
    if (last.size() > 70) last = last.substr(0, 67) + "...";
    std::snprintf(line, sizeof line, "%-10s %-15s %-10s %-12s %11s %-12s %12lld %12lld  %s\n", v.label.c_str(),
                  v.state.c_str(), v.stage.empty() ? "-" : v.stage.c_str(), compact_ids(v.awaiting).c_str(),
                  deadline.c_str(), compact_ids(v.unacknowledged).c_str(), v.bytes_sent, v.bytes_received, last.c_str());
    out << line;
  }
  return out.str();
}

// How the link's first node reaches its peer (topology/reach.h): dialled, answered on the
// connection the peer dialled, or through a relay.
std::string route_of(const Topology& topology, NodeId self, NodeId peer) {
  if (!topology.find(self) || !topology.find(peer)) return "-";
  try {
    const PeerReach way = reach(topology, self, peer);
    if (way.way == PeerReach::Way::Dial) return "dials";
    if (way.way == PeerReach::Way::Answer) return "answers";
    return "relay " + way.relays.front()->name;
  } catch (const InputError&) {
    return "no relay";
  }
}

std::string links_table(const Topology& topology, const std::vector<NodeView>& views) {
  std::ostringstream out;
  char line[256];
  const auto label = [&](long id) {
    const auto* n = topology.find(static_cast<NodeId>(id));
    return n && !n->name.empty() ? n->name : std::to_string(id);
  };
  for (const auto& v : views)
    for (const auto& l : v.links) {
      if (out.tellp() == 0) {
        std::snprintf(line, sizeof line, "%-34s %-12s %12s %12s\n", "link (as its first node counts)", "route",
                      "bytes sent", "bytes recv");
        out << line;
      }
      const std::string name = v.label + " -> " + label(l.peer);
      const std::string route = route_of(topology, v.id, static_cast<NodeId>(l.peer));
      std::snprintf(line, sizeof line, "%-34s %-12s %12lld %12lld\n", name.c_str(), route.c_str(), l.sent, l.received);
      out << line;
    }
  return out.str();
}

std::string status_json(const std::vector<NodeView>& views) {
  std::ostringstream out;
  JsonWriter w(out);
  const auto list = [&](const char* key, const std::vector<long>& v) {
    w.key(key).begin_array();
    for (long x : v) w.value(static_cast<int64_t>(x));
    w.end_array();
  };
  w.begin_array();
  for (const auto& v : views) {
    w.begin_object();
    w.key("id").value(v.id);
    w.key("name").value(v.label);
    w.key("state").value(v.state);
    w.key("stage").value(v.stage);
    list("awaiting", v.awaiting);
    w.key("deadline_in_seconds");
    if (v.deadline_in_seconds) w.value(*v.deadline_in_seconds);
    else w.null();
    w.key("accepted").begin_array();
    for (const auto& a : v.accepted) w.value(a);
    w.end_array();
    list("unacknowledged", v.unacknowledged);
    list("contributors", v.contributors);
    list("missing", v.missing);
    list("refused_by", v.refused_by);
    w.key("accuracy");
    if (v.accuracy) w.value(*v.accuracy);
    else w.null();
    w.key("bytes_sent").value(static_cast<int64_t>(v.bytes_sent));
    w.key("bytes_received").value(static_cast<int64_t>(v.bytes_received));
    w.key("links").begin_array();
    for (const auto& l : v.links)
      w.begin_object()
          .key("peer").value(static_cast<int64_t>(l.peer))
          .key("sent").value(static_cast<int64_t>(l.sent))
          .key("received").value(static_cast<int64_t>(l.received))
          .end_object();
    w.end_array();
    w.key("pid").value(static_cast<int64_t>(v.pid));
    w.key("last_line").value(v.last_line);
    w.key("problem").value(v.problem);
    w.end_object();
  }
  w.end_array();
  return out.str();
}

}  // namespace fednode::cli
