#include "node/node_result.h"

#include "core/json_writer.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace fednode {

const char* to_string(NodeStatus s) {
  switch (s) {
    case NodeStatus::Running: return "running";
    case NodeStatus::Finished: return "finished";
    case NodeStatus::Incomplete: return "incomplete";
    case NodeStatus::Stopped: return "stopped";
  }
  return "?";
}

namespace {
bool covers(const NodeResult& r) {
  return std::includes(r.contributors.begin(), r.contributors.end(), r.expected_contributors.begin(),
                       r.expected_contributors.end());
}
}  // namespace

void score_result(NodeResult& result, const MachineOutcome& o, const std::vector<NodeId>& never,
                  NodeStatus finish_status, const std::optional<Features>& test) {
  result.contributors = o.contributors;
  result.discarded_from = o.discarded_from;
  result.seconds_waiting = o.seconds_waiting;
  result.seconds_merge = o.seconds_merge;
  result.seconds_head = o.seconds_head;
  // Missing: given up on at a deadline and never delivered. A sender whose message came late
  // (and was used: merged into a refit, or a hub's head taken) is not, so a node restarted
  // later, which knows only what it holds, says the same.
  result.missing.clear();
  for (NodeId m : o.missing)
    if (std::binary_search(never.begin(), never.end(), m)) result.missing.push_back(m);
  // A node whose knowledge or head a peer refused has not done its part of the plan, even if
  // its own head is fine; nor has one whose head leaves out data the plan meant it to cover (a
  // peer upstream gave up on someone, and what reached this node is partial).
  const bool short_of_plan = !result.missing.empty() || !result.refused_by.empty() ||
                             !result.discarded_from.empty() || !o.head || !covers(result);
  result.status = finish_status == NodeStatus::Finished && short_of_plan ? NodeStatus::Incomplete : finish_status;
  result.head = o.head;
  if (o.head && test) {
    TestScore score = o.head->score(*test);
    result.accuracy = score.accuracy;
    result.per_class = std::move(score.per_class);
  }
}

std::vector<NodeId> distinct(const std::vector<NodeId>& ids) {
  std::vector<NodeId> out;
  for (NodeId id : ids)
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  return out;
}

std::string result_summary(const NodeResult& result) {
  std::ostringstream msg;
  msg << to_string(result.status);
  if (result.accuracy >= 0) msg << ": accuracy " << std::fixed << std::setprecision(4) << result.accuracy;
  msg << " with contributors " << to_string(result.contributors);
  if (result.head && !covers(result)) msg << ", short of the plan's " << to_string(result.expected_contributors);
  if (!result.head) msg << ", without a head";
  const auto list = [&](const char* what, const std::vector<NodeId>& ids) {
    if (!ids.empty()) msg << "; " << what << " " << to_string(Contributors(ids.begin(), ids.end()));
  };
  list("missing", result.missing);
  list("refused by", result.refused_by);
  list("discarded knowledge from", result.discarded_from);
  list("unacknowledged by", result.unacknowledged);
  return msg.str();
}

namespace {

std::vector<double> accuracies(const std::vector<ClassAccuracy>& per_class) {
  std::vector<double> v;
  for (const auto& c : per_class) v.push_back(c.total ? c.value() : NAN);
  return v;
}

// The head's accuracy, and the personal head's beside it.
void write_accuracies(JsonWriter& w, const NodeResult& r) {
  if (r.accuracy >= 0) {
    w.key("accuracy").value(r.accuracy);
    w.key("per_class_accuracy").array(accuracies(r.per_class));
  } else {
    w.key("accuracy").null();
  }
  w.key("head").value(r.head ? std::string("head") : std::string());
  if (!r.personal_head) return;
  w.key("personal_head").value("personal_head");
  if (r.personal_accuracy < 0) return;
  w.key("personal_accuracy").value(r.personal_accuracy);
  w.key("personal_per_class_accuracy").array(accuracies(r.personal_per_class));
  w.key("accuracy_in_own_proportions").value(r.accuracy_in_own_proportions);
  w.key("personal_accuracy_in_own_proportions").value(r.personal_accuracy_in_own_proportions);
}

void write_traffic(JsonWriter& w, const NodeResult& r) {
  w.key("bytes_sent").value(r.bytes_sent);
  w.key("bytes_received").value(r.bytes_received);
  write_links(w, r.links);
  w.key("knowledge_bytes_sent").value(r.knowledge_bytes_sent);
  w.key("messages_sent").value(r.messages_sent);
  w.key("messages_received").value(r.messages_received);
  w.key("resends").value(r.resends);
  w.key("frames_rejected").value(r.frames_rejected);
  w.key("frames_rejected_by").begin_object();
  for (const auto& [reason, n] : r.frames_rejected_by) w.key(reason).value(n);
  w.end_object();
  w.key("duplicates").value(r.duplicates);
  w.key("streams_abandoned").value(r.streams_abandoned);
}

}  // namespace

std::string result_json(const NodeResult& r, const Topology& topology, const std::string& run_name) {
  std::ostringstream out;
  JsonWriter w(out);
  w.begin_object();
  w.key("fednode_node_result").value(1);
  w.key("id").value(r.id);
  const auto* n = topology.find(r.id);
  w.key("name").value(n ? n->name : std::string());
  w.key("run").value(run_name);
  w.key("method").value(topology.federation.method);
  w.key("mode").value(to_string(topology.federation.mode));
  w.key("status").value(to_string(r.status));
  w.key("samples").value(r.samples);
  w.key("contributors").array_of(r.contributors);
  w.key("expected_contributors").array_of(r.expected_contributors);
  w.key("missing").array(r.missing);
  w.key("unacknowledged").array(r.unacknowledged);
  w.key("refused_by").array(r.refused_by);
  w.key("discarded_from").array(r.discarded_from);
  write_accuracies(w, r);
  write_traffic(w, r);
  w.key("restarts").value(r.restarts);
  write_privacy_ledger(w, r.privacy);
  w.key("seconds").begin_object();
  w.key("total").value(r.seconds_total);
  w.key("waiting").value(r.seconds_waiting);
  w.key("merge").value(r.seconds_merge);
  w.key("head").value(r.seconds_head);
  w.end_object();
  w.end_object();
  out << "\n";
  return out.str();
}

}  // namespace fednode
