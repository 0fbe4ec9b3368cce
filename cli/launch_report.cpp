#include "cli/launch_report.h"

#include "core/json_writer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fednode::cli {
namespace {

// A node's result.json, or an empty object when it left none (or one that cannot be read).
nlohmann::json result_of(const Topology& topology, NodeId id) {
  std::ifstream in(std::filesystem::path(topology.state_dir_of(id)) / "result.json");
  if (!in) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    return j.is_object() ? j : nlohmann::json::object();
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json::object();
  }
}

int64_t integer(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}

void options(JsonWriter& w, const char* key, const OptionMap& map) {
  w.key(key).begin_object();
  for (const auto& [k, v] : map) w.key(k).value(v);
  w.end_object();
}

}  // namespace

namespace {
// Writes a value read from a node's result.json as it is (its privacy ledger).
void copy_json(JsonWriter& w, const nlohmann::json& j) {
  if (j.is_object()) {
    w.begin_object();
    for (const auto& [k, v] : j.items()) copy_json(w.key(k), v);
    w.end_object();
  } else if (j.is_array()) {
    w.begin_array();
    for (const auto& v : j) copy_json(w, v);
    w.end_array();
  } else if (j.is_string()) {
    w.value(j.get<std::string>());
  } else if (j.is_boolean()) {
    w.value(j.get<bool>());
  } else if (j.is_number_integer()) {
    w.value(j.get<int64_t>());
  } else if (j.is_number()) {
    w.value(j.get<double>());
  } else {
    w.null();
  }
}
}  // namespace

std::string launch_report_json(const Topology& topology, const std::string& topology_file, double wall_seconds) {
  std::vector<std::pair<NodeId, nlohmann::json>> results;
  size_t num_classes = 0;
  for (NodeId id : topology.ids()) {
    results.emplace_back(id, result_of(topology, id));
    const auto pc = results.back().second.find("per_class_accuracy");
    if (pc != results.back().second.end() && pc->is_array()) num_classes = std::max(num_classes, pc->size());
  }
  const auto& f = topology.federation;
  std::ostringstream out;
  JsonWriter w(out);
  w.begin_object();
  w.key("fednode_report").value(1);
  w.key("source").value("fednode launch");
  w.key("parameters").begin_object();
  w.key("method").value(f.method);
  w.key("topology").value(to_string(f.mode));
  w.key("nodes").value(static_cast<int64_t>(topology.nodes.size()));
  w.key("topology_file").value(topology_file);
  w.key("hops").value(to_string(topology.hop_encryption()));
  w.key("bytes").value("frames on the wire: sealed, resends and acknowledgements included");
  options(w, "options", f.options);
  options(w, "dataset", f.data);
  w.end_object();
  w.key("seed").value(static_cast<uint64_t>(f.seed));
  w.key("data").begin_object();
  w.key("num_classes").value(static_cast<int64_t>(num_classes));
  w.end_object();
  w.key("nodes").begin_array();
  for (const auto& [id, r] : results) {
    w.begin_object();
    w.key("id").value(id);
    const auto status = r.find("status");
    w.key("status").value(status != r.end() && status->is_string() ? status->get<std::string>() : "no result");
    w.key("samples").value(integer(r, "samples"));
    w.key("contributors").begin_array();
    if (r.contains("contributors") && r["contributors"].is_array())
      for (const auto& c : r["contributors"])
        if (c.is_number()) w.value(c.get<int64_t>());
    w.end_array();
    w.key("accuracy");
    const auto acc = r.find("accuracy");
    if (acc != r.end() && acc->is_number()) w.value(acc->get<double>());
    else w.null();
    w.key("per_class_accuracy").begin_array();
    if (r.contains("per_class_accuracy") && r["per_class_accuracy"].is_array())
      for (const auto& v : r["per_class_accuracy"]) {
        if (v.is_number()) w.value(v.get<double>());
        else w.null();
      }
    w.end_array();
    w.key("bytes_sent").value(integer(r, "bytes_sent"));
    w.key("bytes_received").value(integer(r, "bytes_received"));
    const auto ledger = r.find("privacy");
    if (ledger != r.end() && ledger->is_object()) copy_json(w.key("privacy"), *ledger);
    w.end_object();
  }
  w.end_array();
  w.key("centralized").null();
  w.key("local_only").null();
  w.key("wall_time_seconds").value(wall_seconds);
  w.end_object();
  out << "\n";
  return out.str();
}

}  // namespace fednode::cli
