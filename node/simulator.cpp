#include "node/simulator.h"

#include "methods/fedcgs/fedcgs.h"
#include "core/rng.h"
#include "node/elapsed.h"
#include "node/json.h"
#include "node/options_json.h"
#include "node/phases.h"
#include "node/step.h"
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


bool half_precision_transfer(const MethodOptions& m) {
  return m.method == "fedpft" && m.fedpft.half_precision;
}

// Message sizes as they travel: the knowledge payload in its transfer precision.
int64_t message_bytes(const Knowledge& k, const MethodOptions& m) {
  return k.payload_bytes(half_precision_transfer(m));
}

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
  auto context = [&](int i) {
    NodeContext ctx;
    ctx.node = static_cast<NodeId>(i);
    ctx.seed = options.seed;
    ctx.backbone_fingerprint = options.backbone_fingerprint;
    ctx.num_classes = C;
    ctx.dim = all.dim();
    ctx.progress = options.progress;
    return ctx;
  };
  auto finish_node = [&](int i, const Head& head, const Contributors& contributors, double seconds) {
    auto& r = report.nodes[i];
    r.accuracy = head.accuracy(test_all);
    r.per_class = head.per_class_accuracy(test_all);
    r.contributors = contributors;
    r.seconds += seconds;
    std::ostringstream msg;
    msg << "node " << i << ": accuracy " << std::fixed << std::setprecision(4) << r.accuracy
        << " with " << contributors.size() << " contributor(s)";
    say(msg.str());
  };
  auto send = [&](int from, int to, int64_t bytes) {
    report.nodes[from].bytes_sent += bytes;
    report.nodes[to].bytes_received += bytes;
  };

  // Every node follows its plan (topology/plan.h) exactly as a networked node does; messages
  // are handed over in memory. A node acts as soon as its inputs are in, the smallest id first,
  // so the order is deterministic.
  TopologyBuildOptions build;
  build.mode = options.topology;
  build.nodes = N;
  build.seed = options.seed;
  build.method = options.method.method;
  const Topology topology = build_topology(build);
  const std::vector<NodePlan> plans = plan_all(topology);
  std::vector<std::vector<ReceivedPiece>> inbox(N);
  std::vector<std::set<NodeId>> heard_from(N);  // senders whose phase-1 knowledge is complete
  std::vector<std::shared_ptr<const Head>> hub_head(N);
  std::vector<Contributors> hub_contributors(N);
  std::vector<uint64_t> sent(N, 0);
  std::vector<bool> phase1_done(N, false), phase2_done(N, false);
  std::vector<std::shared_ptr<const Head>> heads(N);
  auto deliver = [&](int from, NodeId to, PlanMessage kind, const Knowledge& k) {
    send(from, static_cast<int>(to), message_bytes(k, options.method));
    inbox[to].push_back(ReceivedPiece{static_cast<NodeId>(from), ++sent[from], kind, k});
    if (kind == PlanMessage::Knowledge) heard_from[to].insert(static_cast<NodeId>(from));
  };
  auto all_in = [&](const std::vector<NodeId>& senders, int i) {
    for (NodeId s : senders)
      if (!heard_from[i].count(s)) return false;
    return true;
  };
  auto complete_of = [&](int i) -> const Knowledge* {
    for (const auto& p : inbox[i])
      if (p.kind == PlanMessage::Complete) return &p.knowledge;
    return nullptr;
  };
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int i = 0; i < N && !progressed; ++i) {
      const NodePlan& plan = plans[i];
      if (!phase1_done[i] && all_in(plan.wait_for, i)) {
        say("node " + std::to_string(i) + ": " + (plan.fits_head ? "merging and fitting its head" : "summarising") +
            " (" + method->name() + ")");
        const auto t0 = Clock::now();
        PhaseOne out = run_phase_one(*method, plan, inbox[i], local[i], context(i));
        if (out.head) {
          heads[i] = std::shared_ptr<const Head>(std::move(out.head));
          finish_node(i, *heads[i], out.head_contributors, 0);
        }
        report.nodes[i].seconds += seconds_since(t0);
        for (NodeId to : plan.forward_to)
          for (const auto& k : out.outgoing) deliver(i, to, PlanMessage::Knowledge, k);
        for (NodeId to : plan.feedback_to)
          for (const auto& k : out.outgoing) deliver(i, to, PlanMessage::Knowledge, k);
        if (out.complete) deliver(i, *plan.complete_to, PlanMessage::Complete, out.outgoing[*out.complete]);
        for (NodeId to : plan.send_head_to) {
          send(i, static_cast<int>(to), head_bytes(*heads[i]));
          hub_head[to] = heads[i];
          hub_contributors[to] = report.nodes[i].contributors;
        }
        phase1_done[i] = progressed = true;
        if (!plan.has_phase2()) {
          phase2_done[i] = true;
          std::vector<ReceivedPiece>().swap(inbox[i]);  // a finished node reads nothing more
        }
        continue;
      }
      if (phase1_done[i] && !phase2_done[i]) {
        if (plan.head_from && !hub_head[i]) continue;
        if (plan.complete_from && !complete_of(i)) continue;
        if (!all_in(plan.late_from, i)) continue;
        const auto t0 = Clock::now();
        if (plan.head_from) {
          heads[i] = hub_head[i];
          report.nodes[i].accuracy = heads[i]->accuracy(test_all);
          report.nodes[i].per_class = heads[i]->per_class_accuracy(test_all);
          report.nodes[i].contributors = hub_contributors[i];
        }
        if (const Knowledge* complete = plan.complete_from ? complete_of(i) : nullptr) {
          say("node " + std::to_string(i) + ": refitting on the complete knowledge (second pass)");
          Refit r = refit_head(*method, {*complete}, local[i], context(i));
          heads[i] = std::shared_ptr<const Head>(std::move(r.head));
          finish_node(i, *heads[i], r.contributors, 0);
          if (plan.complete_to) deliver(i, *plan.complete_to, PlanMessage::Complete, *complete);
        }
        if (!plan.late_from.empty()) {
          const std::vector<Knowledge> knowledge = knowledge_in_order(inbox[i]);
          say("node " + std::to_string(i) + ": refitting with its feedback knowledge");
          Refit r = refit_head(*method, knowledge, local[i], context(i));
          heads[i] = std::shared_ptr<const Head>(std::move(r.head));
          finish_node(i, *heads[i], r.contributors, 0);
        }
        report.nodes[i].seconds += seconds_since(t0);
        phase2_done[i] = progressed = true;
        // Relays in graph mode pass pieces on unchanged, so inboxes hold many copies of the
        // same knowledge: a finished node's go as soon as it is done.
        std::vector<ReceivedPiece>().swap(inbox[i]);
      }
    }
  }
  for (int i = 0; i < N; ++i)
    if (!phase2_done[i]) throw InputError("node " + std::to_string(i) + " could never finish in this topology");

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
