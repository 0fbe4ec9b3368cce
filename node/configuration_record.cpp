#include "node/configuration_record.h"

#include "core/digest.h"
#include "methods/registry.h"
#include "core/json_writer.h"
#include "node/options_json.h"
#include "node/printable.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace fednode {
namespace {

std::string training_digest(const Features& f) {
  Sha256 sha;
  // Row-major or not, the same matrix gives the same bytes in the same layout every time.
  sha.update(f.X.data(), static_cast<size_t>(f.X.size()) * sizeof(float));
  sha.update(f.y.data(), f.y.size() * sizeof(f.y[0]));
  return sha.hex();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // Indentation and the commas between entries are layout, not content.
    const auto first = line.find_first_not_of(' ');
    line = first == std::string::npos ? std::string() : line.substr(first);
    if (!line.empty() && line.back() == ',') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

}  // namespace

std::string configuration_record(const NodeConfig& c) {
  std::ostringstream out;
  JsonWriter w(out);
  const auto& f = c.topology.federation;
  w.begin_object();
  w.key("node").value(c.id);
  w.key("method").value(c.method.method);
  write_method_options(w, c.method);
  const MethodDescriptor& method = method_named(c.method.method);
  if (method.trains_linear_head) write_linear_head_options(w, c.method.fedpft.head);
  w.key("head_seed").value(method.head_seed(c.method));
  w.key("backbone").value(c.backbone_fingerprint);
  w.key("dim").value(c.local.dim());
  w.key("num_classes").value(c.local.num_classes);
  w.key("training_samples").value(c.local.size());
  w.key("training_sha256").value(training_digest(c.local));
  w.key("mode").value(to_string(f.mode));
  w.key("seed").value(f.seed);
  if (f.hub) w.key("hub").value(*f.hub);
  if (f.start) w.key("start").value(*f.start);
  std::vector<std::string> edges;
  for (const auto& e : c.topology.edges)
    edges.push_back(std::to_string(e.from) + (e.feedback ? "~>" : "->") + std::to_string(e.to));
  w.key("edges").array(edges);
  w.end_object();
  out << "\n";
  return out.str();
}

std::string sealed_configuration(const std::string& record) { return record + "sha256 " + sha256_hex(record) + "\n"; }

std::optional<std::string> unsealed_configuration(const std::string& file_text) {
  const std::string tag = "sha256 ";
  const auto at = file_text.rfind(tag);
  if (at == std::string::npos || (at > 0 && file_text[at - 1] != '\n')) return std::nullopt;
  const std::string record = file_text.substr(0, at);
  if (file_text.substr(at) != tag + sha256_hex(record) + "\n") return std::nullopt;
  return record;
}

std::string first_difference(const std::string& was, const std::string& now) {
  const auto a = lines_of(was), b = lines_of(now);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "(nothing)", y = i < b.size() ? b[i] : "(nothing)";
    if (x != y) return printable(x) + " -> " + printable(y);  // the stored side comes from a file
  }
  return "";
}

void check_configuration(StateStore& store, const NodeConfig& config) {
  const std::string record = configuration_record(config);
  const auto stored = store.read_text("configuration", 1 << 20);
  const std::string remove = "; remove the directory to start the run over";
  if (!stored) {
    // Written at the first start, before anything else: a directory a node has started in
    // without one was not made by this version, or the record was removed.
    if (store.started_before())
      throw InputError("state directory '" + store.dir() + "' holds a run but no configuration record" + remove);
    store.write_text("configuration", sealed_configuration(record));
    return;
  }
  const auto was = unsealed_configuration(*stored);
  if (!was) throw InputError("state file '" + store.path("configuration") + "' is damaged (checksum)" + remove);
  const std::string difference = first_difference(*was, record);
  if (!difference.empty())
    throw InputError("state directory '" + store.dir() + "' holds a run of node " + std::to_string(config.id) +
                     " started with another configuration (" + difference +
                     "): give this configuration a state directory of its own, or remove that one to start over");
}

}  // namespace fednode
