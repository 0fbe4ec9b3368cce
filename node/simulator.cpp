#include "node/simulator.h"

#include "methods/fedcgs/fedcgs.h"
#include "methods/rng.h"
#include "node/elapsed.h"
#include "node/json.h"
#include "node/options_json.h"
#include "node/machine.h"
#include "topology/builders.h"
#include "topology/plan.h"

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace fednode {
namespace {

using Clock = std::chrono::steady_clock;

// The federation's machines, with every Send handed to its recipient at once. A node acts as
// soon as its inputs are in, the smallest id first, so the order is deterministic; sequence
// numbers count each sender's messages, as message ids do on the network.
class InMemoryFederation {
 public:
  InMemoryFederation(std::vector<std::unique_ptr<Machine>> machines, std::string fingerprint,
                     std::vector<SimNodeResult>& nodes, std::function<void(const std::string&)> say)
      : machines_(std::move(machines)),
        fingerprint_(std::move(fingerprint)),
        nodes_(nodes),
        say_(std::move(say)),
        sent_(machines_.size(), 0) {}

  // Steps the machines until none has anything left to do; throws for a node that never finished.
  void run() {
    const int n = static_cast<int>(machines_.size());
    for (bool progressed = true; progressed;) {
      progressed = false;
      for (int i = 0; i < n && !progressed; ++i) {
        Machine& m = *machines_[i];
        if (m.plan_done() && !m.refit_due()) continue;
        const auto t0 = Clock::now();
        Actions actions = m.tick(0.0);
        nodes_[i].seconds += seconds_since(t0);
        if (actions.empty()) continue;
        deliver(i, std::move(actions));
        progressed = true;
        // Relays in graph mode pass pieces on unchanged, so machines hold many copies of the
        // same knowledge: a finished node's go as soon as it is done.
        if (m.plan_done() && !m.refit_due()) m.release_inputs();
      }
    }
    for (int i = 0; i < n; ++i)
      if (!machines_[i]->plan_done()) throw InputError("node " + std::to_string(i) + " could never finish in this topology");
  }

  const Machine& machine(int i) const { return *machines_[i]; }

 private:
  void deliver(int from, Actions actions) {
    for (Action& a : actions) {
      if (a.kind == Action::Kind::Say && say_) say_("node " + std::to_string(from) + ": " + a.line);
      if (a.kind != Action::Kind::Send) continue;
      nodes_[from].bytes_sent += a.counted_bytes;
      nodes_[a.to].bytes_received += a.counted_bytes;
      Payload payload = a.knowledge ? Payload(*a.knowledge) : Payload(HeadMessage{a.head, a.contributors, fingerprint_});
      deliver(static_cast<int>(a.to), machines_[a.to]->accept(static_cast<NodeId>(from), ++sent_[from], a.type,
                                                              std::move(payload), /*fresh=*/true, 0.0));
    }
  }

  std::vector<std::unique_ptr<Machine>> machines_;
  std::string fingerprint_;
  std::vector<SimNodeResult>& nodes_;
  std::function<void(const std::string&)> say_;
  std::vector<uint64_t> sent_;
};

}  // namespace

SimulationReport simulate(const Features& train, const Features& test, const SimulationOptions& options) {
  const auto t_start = Clock::now();
  train.validate("training features");
  test.validate("test features");
  if (train.dim() != test.dim())
    throw InputError("training features have dimension " + std::to_string(train.dim()) +
                     ", test features " + std::to_string(test.dim()));
  const int C = std::max(train.num_classes, test.num_classes);
  const int N = options.partition.nodes;
  if (N < 1) throw InputError("the federation needs at least one node");
  if (options.topology == TopologyMode::Star && N < 2)
    throw InputError("a star needs a hub and at least one leaf (--nodes >= 2)");
  auto say = [&](const std::string& msg) {
    if (options.progress) options.progress(msg);
  };

  Features all = train;
  all.num_classes = C;
  Features test_all = test;
  test_all.num_classes = C;

  SimulationReport report;
  report.options = options;
  report.train_samples = all.size();
  report.test_samples = test_all.size();
  report.dim = all.dim();
  report.num_classes = C;

  const Partition partition = make_partition(all.y, C, options.partition);
  const auto counts = partition_counts(partition, all.y, C);
  std::vector<Features> local(N);
  report.nodes.resize(N);
  for (int i = 0; i < N; ++i) {
    local[i] = all.subset(partition[i]);
    auto& r = report.nodes[i];
    r.id = static_cast<NodeId>(i);
    r.samples = local[i].size();
    r.class_counts = counts[i];
    for (int c = 0; c < C; ++c)
      if (counts[i][c] > 0) r.classes_held.push_back(c);
  }
  for (int c = 0; c < C; ++c) {
    int64_t held = 0;
    for (int i = 0; i < N; ++i) held += counts[i][c];
    if (held == 0) report.absent_classes.push_back(c);
  }

  const auto method = make_method(options.method);
  TopologyBuildOptions build;
  build.mode = options.topology;
  build.nodes = N;
  build.seed = options.seed;
  build.method = options.method.method;
  const Topology topology = build_topology(build);
  const std::vector<NodePlan> plans = plan_all(topology);
  std::vector<std::unique_ptr<Machine>> machines;
  for (int i = 0; i < N; ++i) {
    MachineConfig m;
    m.topology = &topology;
    m.plan = plans[i];
    m.method = method.get();
    m.local = &local[i];
    m.ctx.node = static_cast<NodeId>(i);
    m.ctx.seed = options.seed;
    m.ctx.backbone_fingerprint = options.backbone_fingerprint;
    m.ctx.num_classes = C;
    m.ctx.dim = all.dim();
    m.ctx.progress = options.progress;
    m.transfer = transfer_precision(options.method);
    if (options.progress) m.say = [&say, i](const std::string& line) { say("node " + std::to_string(i) + ": " + line); };
    machines.push_back(std::make_unique<Machine>(std::move(m)));
  }
  InMemoryFederation federation(std::move(machines), options.backbone_fingerprint, report.nodes, options.progress);
  federation.run();
  for (int i = 0; i < N; ++i) {
    const MachineOutcome& o = federation.machine(i).outcome();
    if (!o.head) throw InputError("node " + std::to_string(i) + " ended without a head in this topology");
    auto& r = report.nodes[i];
    r.accuracy = o.head->accuracy(test_all);
    r.per_class = o.head->per_class_accuracy(test_all);
    r.contributors = o.contributors;
    std::ostringstream msg;
    msg << "node " << i << ": accuracy " << std::fixed << std::setprecision(4) << r.accuracy << " with "
        << r.contributors.size() << " contributor(s)";
    say(msg.str());
  }

  if (options.baselines) {
    say("baselines: centralised LDA");
    FedCgsOptions lda_options = options.method.fedcgs;
    report.centralized_lda = fit_lda_head(compute_stats(all), lda_options)->accuracy(test_all);
    say("baselines: centralised linear head on all real features");
    LinearTrainOptions head = options.method.fedpft.head;
    head.seed = derive_seed(options.seed, {static_cast<uint64_t>(Purpose::HeadInit), 0xCE27});
    report.centralized_linear = train_linear_head(all, head)->accuracy(test_all);
    for (int i = 0; i < N; ++i) {
      say("baselines: local-only head of node " + std::to_string(i));
      if (local[i].size() == 0) continue;
      LinearTrainOptions h = head;
      h.seed = derive_seed(options.seed, {static_cast<uint64_t>(Purpose::HeadInit), static_cast<uint64_t>(i)});
      report.nodes[i].local_only_accuracy = train_linear_head(local[i], h)->accuracy(test_all);
    }
    report.has_baselines = true;
  }
  report.wall_seconds = seconds_since(t_start);
  return report;
}

void write_report_json(const SimulationReport& r, std::ostream& out) {
  JsonWriter w(out);
  write_report(w, r);
}

void write_report(JsonWriter& w, const SimulationReport& r) {
  const auto& o = r.options;
  w.begin_object();
  w.key("fednode_report").value(1);
  w.key("parameters").begin_object();
  w.key("method").value(o.method.method);
  w.key("topology").value(to_string(o.topology));
  w.key("nodes").value(o.partition.nodes);
  w.key("partition").value(to_string(o.partition.scheme));
  w.key("dirichlet_alpha").value(o.partition.dirichlet_alpha);
  w.key("min_samples").value(o.partition.min_samples);
  w.key("classes_per_node").value(o.partition.classes_per_node);
  w.key("dataset").value(o.dataset_description);
  w.key("backbone_fingerprint").value(o.backbone_fingerprint);
  write_method_options(w, o.method);
  write_linear_head_options(w, o.method.fedpft.head);
  w.end_object();
  w.key("seed").value(o.seed);
  w.key("data").begin_object();
  w.key("train_samples").value(r.train_samples);
  w.key("test_samples").value(r.test_samples);
  w.key("dim").value(r.dim);
  w.key("num_classes").value(r.num_classes);
  w.key("absent_classes").array(r.absent_classes);
  w.end_object();
  w.key("nodes").begin_array();
  for (const auto& n : r.nodes) {
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
    if (r.has_baselines) w.key("local_only_accuracy").value(n.local_only_accuracy);
    w.key("bytes_sent").value(n.bytes_sent);
    w.key("bytes_received").value(n.bytes_received);
    w.key("seconds").value(n.seconds);
    w.end_object();
  }
  w.end_array();
  if (r.has_baselines) {
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
