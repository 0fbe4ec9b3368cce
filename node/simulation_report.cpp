// The simulator's report: JSON (docs/report.md) and a short table for people.
#include "core/json_writer.h"
#include "node/options_json.h"
#include "node/simulator.h"

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <ostream>

namespace fednode {

namespace {
void write_node(JsonWriter& w, const SimNodeResult& n, bool has_baselines, bool personalized) {
  w.begin_object();
  w.key("id").value(n.id);
  w.key("samples").value(n.samples);
  w.key("classes").array(n.classes_held);
  w.key("class_counts").array(n.class_counts);
  w.key("contributors").array_of(n.contributors);
  w.key("accuracy").value(n.accuracy);
  std::vector<double> per_class;
  for (const auto& c : n.per_class) per_class.push_back(c.total ? c.value() : NAN);
  w.key("per_class_accuracy").array(per_class);
  if (has_baselines) w.key("local_only_accuracy").value(n.local_only_accuracy);
  w.key("bytes_sent").value(n.bytes_sent);
  w.key("bytes_received").value(n.bytes_received);
  w.key("seconds").value(n.seconds);
  write_privacy_ledger(w, n.privacy);
  if (personalized) {
    w.key("personalized").begin_object();
    w.key("local_only").value(n.personalized.local_only);
    w.key("fedcgs").value(n.personalized.global);
    w.key("personal").value(n.personalized.personal);
    w.end_object();
  }
  w.end_object();
}
}  // namespace

void write_report_json(const SimulationReport& r, std::ostream& out) {
  JsonWriter w(out);
  write_report(w, r);
}

namespace {

void write_parameters(JsonWriter& w, const SimulationOptions& o) {
  w.key("parameters").begin_object();
  w.key("method").value(o.method.method);
  w.key("topology").value(to_string(o.topology));
  w.key("nodes").value(o.partition.nodes);
  w.key("partition").value(to_string(o.partition.scheme));
  w.key("dirichlet_alpha").value(o.partition.dirichlet_alpha);
  w.key("min_samples").value(o.partition.min_samples);
  w.key("classes_per_node").value(o.partition.classes_per_node);
  if (o.partition.scheme == PartitionScheme::Dominant) w.key("uniform_share").value(o.partition.uniform_share);
  w.key("dataset").value(o.dataset_description);
  w.key("backbone_fingerprint").value(o.backbone_fingerprint);
  write_method_options(w, o.method);
  write_linear_head_options(w, o.method.fedpft.head);
  w.end_object();
}

// The centralised heads, every node's local-only head and the method's own baselines.
void write_baselines(JsonWriter& w, const SimulationReport& r) {
  w.key("centralized").begin_object();
  w.key("linear").value(r.centralized_linear);
  w.key("lda").value(r.centralized_lda);
  w.end_object();
  std::vector<double> local_only;
  double mean = 0;
  for (const auto& n : r.nodes) {
    local_only.push_back(n.local_only_accuracy);
    mean += n.local_only_accuracy / static_cast<double>(r.nodes.size());
  }
  w.key("local_only").begin_object();
  w.key("per_node").array(local_only);
  w.key("mean").value(mean);
  w.end_object();
  w.key("method_baselines").begin_array();
  for (const auto& b : r.method_baselines) {
    w.begin_object();
    w.key("name").value(b.name);
    w.key("accuracy").value(b.accuracy);
    w.key("seconds").value(b.seconds);
    w.end_object();
  }
  w.end_array();
  w.key("method_baseline_shared_seconds").begin_object();
  for (const auto& b : r.method_baseline_seconds) w.key(b.name).value(b.seconds);
  w.end_object();
}

}  // namespace

void write_report(JsonWriter& w, const SimulationReport& r) {
  const auto& o = r.options;
  w.begin_object();
  w.key("fednode_report").value(1);
  write_parameters(w, o);
  w.key("seed").value(o.seed);
  w.key("data").begin_object();
  w.key("train_samples").value(r.train_samples);
  w.key("test_samples").value(r.test_samples);
  w.key("dim").value(r.dim);
  w.key("num_classes").value(r.num_classes);
  w.key("absent_classes").array(r.absent_classes);
  w.end_object();
  w.key("nodes").begin_array();
  for (const auto& n : r.nodes) write_node(w, n, r.has_baselines, o.method.fedcgs.personalize.has_value());
  w.end_array();
  if (r.has_baselines) {
    write_baselines(w, r);
  } else {
    w.key("centralized").null();
    w.key("local_only").null();
  }
  w.key("wall_time_seconds").value(r.wall_seconds);
  w.end_object();
}

void print_report_table(const SimulationReport& r, std::ostream& out) {
  const auto& o = r.options;
  out << o.method.method << " over a " << to_string(o.topology) << " of " << r.nodes.size()
      << " nodes, partition " << to_string(o.partition.scheme);
  if (o.partition.scheme == PartitionScheme::Dirichlet) out << " (alpha " << o.partition.dirichlet_alpha << ")";
  out << ", seed " << o.seed << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-5s %8s %8s %13s %9s %11s %12s\n", "node", "samples", "classes",
                "contributors", "accuracy", "local-only", "bytes sent");
  out << line;
  for (const auto& n : r.nodes) {
    std::snprintf(line, sizeof line, "%-5u %8lld %8zu %13zu %9.4f %11s %12lld\n", n.id,
                  static_cast<long long>(n.samples), n.classes_held.size(), n.contributors.size(),
                  n.accuracy,
                  r.has_baselines && n.local_only_accuracy >= 0
                      ? (std::to_string(n.local_only_accuracy).substr(0, 6)).c_str()
                      : "-",
                  static_cast<long long>(n.bytes_sent));
    out << line;
  }
  if (r.has_baselines) {
    std::snprintf(line, sizeof line, "centralised: linear %.4f, lda %.4f\n", r.centralized_linear,
                  r.centralized_lda);
    out << line;
    for (const auto& b : r.method_baselines) {
      std::snprintf(line, sizeof line, "%s baseline %-20s %.4f (%.1f s)\n", o.method.method.c_str(), b.name.c_str(),
                    b.accuracy, b.seconds);
      out << line;
    }
  }
  const bool private_run = std::any_of(r.nodes.begin(), r.nodes.end(), [](const SimNodeResult& n) {
    return ledger_summary(n.privacy) != "not private";
  });
  if (private_run) {
    out << "privacy per node (docs/privacy.md):";
    for (const auto& n : r.nodes) out << (n.id ? "; " : " ") << n.id << ": " << ledger_summary(n.privacy);
    out << '\n';
  }
  if (!r.absent_classes.empty()) {
    out << "classes held by no node:";
    for (int c : r.absent_classes) out << ' ' << c;
    out << '\n';
  }
  std::snprintf(line, sizeof line, "wall time %.1f s\n", r.wall_seconds);
  out << line;
}

}  // namespace fednode
