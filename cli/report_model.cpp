#include "cli/report_model.h"

#include "core/types.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fednode::cli {
namespace {

using nlohmann::json;

// Reads fields of one report, each message naming the file and the field's path in it.
struct Reader {
  std::string file;

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InputError(file + ": " + where + " " + what + " (docs/report.md)");
  }
  const json& object(const json& j, const std::string& key, const std::string& where) const {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_object()) fail(where + key, "is missing or not an object");
    return *it;
  }
  const json& array(const json& j, const std::string& key, const std::string& where) const {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_array()) fail(where + key, "is missing or not an array");
    return *it;
  }
  double number(const json& j, const std::string& key, const std::string& where) const {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number()) fail(where + key, "is missing or not a number");
    return it->get<double>();
  }
  // Absent and null alike are "not computed" (--no-baselines, an empty class).
  std::optional<double> maybe_number(const json& j, const std::string& key, const std::string& where) const {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) fail(where + key, "is not a number");
    return it->get<double>();
  }
  std::string text(const json& j, const std::string& key, const std::string& where) const {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) fail(where + key, "is missing or not a string");
    return it->get<std::string>();
  }
  std::vector<long> ids(const json& j, const std::string& key, const std::string& where) const {
    std::vector<long> out;
    const auto it = j.find(key);
    if (it == j.end()) return out;
    if (!it->is_array()) fail(where + key, "is not an array");
    for (const auto& v : *it) {
      if (!v.is_number_integer()) fail(where + key, "holds something other than integers");
      out.push_back(v.get<long>());
    }
    return out;
  }
  std::vector<std::optional<double>> per_class(const json& j, const std::string& where) const {
    std::vector<std::optional<double>> out;
    const auto it = j.find("per_class_accuracy");
    if (it == j.end()) return out;
    if (!it->is_array()) fail(where + "per_class_accuracy", "is not an array");
    for (const auto& v : *it) {
      if (v.is_null()) out.push_back(std::nullopt);
      else if (v.is_number()) out.push_back(v.get<double>());
      else fail(where + "per_class_accuracy", "holds something other than numbers and nulls");
    }
    return out;
  }
};

void flatten(const json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out.emplace_back(prefix, j.is_string() ? j.get<std::string>() : j.dump());
}

// One simulate report's run as the model; `where` prefixes field paths in messages.
void read_run(const Reader& r, const json& j, const std::string& where, ReportModel& m) {
  const json& p = r.object(j, "parameters", where);
  m.method = r.text(p, "method", where + "parameters.");
  m.topology = r.text(p, "topology", where + "parameters.");
  m.node_count = static_cast<long>(r.number(p, "nodes", where + "parameters."));
  m.seed = static_cast<uint64_t>(r.number(j, "seed", where));
  const json& data = r.object(j, "data", where);
  m.num_classes = static_cast<long>(r.number(data, "num_classes", where + "data."));
  m.parameters.clear();
  flatten(p, "parameters", m.parameters);
  m.parameters.emplace_back("seed", j.at("seed").dump());
  flatten(data, "data", m.parameters);
  if (j.contains("wall_time_seconds")) m.parameters.emplace_back("wall_time_seconds", j.at("wall_time_seconds").dump());
  const auto c = j.find("centralized");
  if (c != j.end() && c->is_object()) {
    m.centralized_linear = r.maybe_number(*c, "linear", where + "centralized.");
    m.centralized_lda = r.maybe_number(*c, "lda", where + "centralized.");
  }
  const auto l = j.find("local_only");
  if (l != j.end() && l->is_object()) m.local_only_mean = r.maybe_number(*l, "mean", where + "local_only.");
  m.nodes.clear();
  const json& nodes = r.array(j, "nodes", where);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string at = where + "nodes[" + std::to_string(i) + "].";
    const json& n = nodes[i];
    if (!n.is_object()) r.fail(where + "nodes[" + std::to_string(i) + "]", "is not an object");
    ReportNode node;
    node.id = static_cast<long>(r.number(n, "id", at));
    node.samples = static_cast<long>(r.number(n, "samples", at));
    node.contributors = r.ids(n, "contributors", at);
    node.accuracy = r.maybe_number(n, "accuracy", at);
    node.local_only = r.maybe_number(n, "local_only_accuracy", at);
    node.bytes_sent = r.number(n, "bytes_sent", at);
    node.bytes_received = r.number(n, "bytes_received", at);
    node.per_class = r.per_class(n, at);
    const auto ledger = n.find("privacy");
    if (ledger != n.end() && ledger->is_object()) {
      const auto eps = ledger->find("epsilon");
      if (eps != ledger->end() && !eps->is_string()) {  // the string is "not private"
        node.epsilon = r.maybe_number(*ledger, "epsilon", at + "privacy.");
        node.delta = r.maybe_number(*ledger, "delta", at + "privacy.");
      }
    }
    m.nodes.push_back(std::move(node));
  }
}

std::optional<double> mean_of(const Reader& r, const json& j, const std::string& key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) r.fail(where + key, "is not an object with mean and sd");
  return r.maybe_number(*it, "mean", where + key + ".");
}

void read_sweep(const Reader& r, const json& j, ReportModel& m) {
  m.sweep = true;
  m.seeds = r.ids(j, "seeds", "");
  const json& runs = r.array(j, "runs", "");
  if (runs.empty()) r.fail("runs", "is empty");
  // The first run gives the parameters (the same in every run but the seed) and the shape.
  read_run(r, runs[0], "runs[0].", m);
  m.parameters.erase(std::remove_if(m.parameters.begin(), m.parameters.end(),
                                    [](const auto& kv) { return kv.first == "seed" || kv.first == "wall_time_seconds"; }),
                     m.parameters.end());
  std::string seeds;
  for (long s : m.seeds) seeds += (seeds.empty() ? "" : ",") + std::to_string(s);
  m.parameters.insert(m.parameters.begin() + 0, {"seeds", seeds});
  if (j.contains("wall_time_seconds")) m.parameters.emplace_back("wall_time_seconds", j.at("wall_time_seconds").dump());
  const json& summary = r.object(j, "summary", "");
  const auto c = summary.find("centralized");
  m.centralized_linear = m.centralized_lda = std::nullopt;
  if (c != summary.end() && c->is_object()) {
    m.centralized_linear = mean_of(r, *c, "linear", "summary.centralized.");
    m.centralized_lda = mean_of(r, *c, "lda", "summary.centralized.");
  }
  const json& nodes = r.array(summary, "nodes", "summary.");
  if (nodes.size() != m.nodes.size()) r.fail("summary.nodes", "does not have one entry per node of runs[0]");
  // Bytes and per-class accuracies: the mean over the runs (a class is null if any run has no
  // test sample of it, which the same test split never gives).
  std::vector<ReportModel> runs_read(runs.size());
  for (size_t k = 1; k < runs.size(); ++k) read_run(r, runs[k], "runs[" + std::to_string(k) + "].", runs_read[k]);
  double local_sum = 0;
  int local_count = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string at = "summary.nodes[" + std::to_string(i) + "].";
    ReportNode& n = m.nodes[i];
    n.id = static_cast<long>(r.number(nodes[i], "id", at));
    n.accuracy = mean_of(r, nodes[i], "accuracy", at);
    const auto acc = nodes[i].find("accuracy");
    if (acc != nodes[i].end() && acc->is_object()) n.accuracy_sd = r.maybe_number(*acc, "sd", at + "accuracy.");
    n.local_only = mean_of(r, nodes[i], "local_only_accuracy", at);
    if (n.local_only) {
      local_sum += *n.local_only;
      ++local_count;
    }
    for (size_t k = 1; k < runs.size(); ++k) {
      if (runs_read[k].nodes.size() != m.nodes.size()) r.fail("runs[" + std::to_string(k) + "].nodes", "has another node count than runs[0]");
      const ReportNode& o = runs_read[k].nodes[i];
      *n.bytes_sent += *o.bytes_sent;
      *n.bytes_received += *o.bytes_received;
      for (size_t c2 = 0; c2 < n.per_class.size(); ++c2) {
        if (c2 >= o.per_class.size() || !o.per_class[c2] || !n.per_class[c2]) n.per_class[c2] = std::nullopt;
        else *n.per_class[c2] += *o.per_class[c2];
      }
    }
    const double k = static_cast<double>(runs.size());
    *n.bytes_sent /= k;
    *n.bytes_received /= k;
    for (auto& v : n.per_class)
      if (v) *v /= k;
    n.samples = std::nullopt;  // differs from seed to seed
    n.contributors.clear();
  }
  m.local_only_mean = local_count ? std::optional<double>(local_sum / local_count) : std::nullopt;
}

}  // namespace

ReportModel load_report(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path + ": is a directory, not a report file");
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw InputError(path + ": not a JSON report (fednode simulate --report writes one): " + e.what());
  }
  const Reader r{path};
  ReportModel m;
  m.source = path;
  if (!j.is_object() || !(j.contains("fednode_report") || j.contains("fednode_seed_sweep")))
    throw InputError(path + ": not a fednode report: a report has \"fednode_report\" (fednode simulate --report) "
                     "or \"fednode_seed_sweep\" (with --seeds) at its top (docs/report.md)");
  const bool sweep = j.contains("fednode_seed_sweep");
  const json& version = j.at(sweep ? "fednode_seed_sweep" : "fednode_report");
  if (!version.is_number_integer() || version.get<long>() != 1)
    throw InputError(path + ": " + (sweep ? "fednode_seed_sweep" : "fednode_report") + " version " + version.dump() +
                     "; this fednode reads version 1");
  if (sweep) read_sweep(r, j, m);
  else read_run(r, j, "", m);
  return m;
}

}  // namespace fednode::cli
