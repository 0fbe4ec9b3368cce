#include "node/simulator.h"

#include "node/member.h"
#include "node/wire_message.h"
#include "node/secure_aggregation.h"

#include "methods/fedcgs/fedcgs.h"
#include "methods/fedcgs/stats.h"
#include "core/rng.h"
#include "core/elapsed.h"
#include "node/machine.h"
#include "topology/builders.h"
#include "topology/plan.h"

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <map>
#include <sstream>

namespace fednode {
namespace {

using Clock = std::chrono::steady_clock;

// The federation's machines, with every Send handed to its recipient at once. A node acts as
// soon as its inputs are in, the smallest id first, so the order is deterministic; sequence
// numbers count each sender's messages, as message ids do on the network.
class InMemoryFederation {
 public:
  InMemoryFederation(std::vector<RunningMember> members, std::vector<SimNodeResult>& nodes,
                     std::function<void(const std::string&)> say)
      : members_(std::move(members)),
        nodes_(nodes),
        say_(std::move(say)),
        sent_(members_.size(), 0),
        personal_(members_.size()) {}

  // Steps the machines until none has anything left to do; throws for a node that never finished.
  void run() {
    const int n = static_cast<int>(members_.size());
    for (bool progressed = true; progressed;) {
      progressed = false;
      for (int i = 0; i < n && !progressed; ++i) {
        Machine& m = *members_[i].machine;
        if (m.plan_done() && !m.refit_due()) continue;
        const auto t0 = Clock::now();
        Actions actions = m.tick(0.0);
        nodes_[i].seconds += seconds_since(t0);
        if (actions.empty()) continue;
        deliver(i, std::move(actions));
        progressed = true;
        if (!m.plan_done() || m.refit_due()) continue;
        // Its personal head (personalised runs) needs what it holds; a networked node trains it
        // when it finishes.
        try {
          personal_[i] = m.personal_head();
        } catch (const InputError& e) {  // as a networked node: its federation head stays its result
          if (say_) say_("node " + std::to_string(i) + ": warning: no personal head: " + e.what());
        }
        // Relays in graph mode pass pieces on unchanged, so machines hold many copies of the
        // same knowledge: a finished node's go as soon as it is done.
        m.release_inputs();
      }
    }
    for (int i = 0; i < n; ++i)
      if (!members_[i].machine->plan_done()) throw InputError("node " + std::to_string(i) + " could never finish in this topology");
  }

  const Machine& machine(int i) const { return *members_[i].machine; }
  // Node i's personal head; null where the run does not personalise.
  std::shared_ptr<const Head> personal_head(int i) const { return personal_[i]; }

 private:
  void deliver(int from, Actions actions) {
    for (Action& a : actions) {
      if (a.kind == Action::Kind::Say && say_) say_("node " + std::to_string(from) + ": " + a.line);
      if (a.kind != Action::Kind::Send) continue;
      nodes_[from].bytes_sent += a.counted_bytes;
      nodes_[a.to].bytes_received += a.counted_bytes;
      RunningMember& to = members_[a.to];
      const auto seq = ++sent_[from];
      const NodeId sender = static_cast<NodeId>(from);
      deliver(static_cast<int>(a.to),
              a.message     ? to.admission->accept(sender, seq, wire_type(a), wire_message(a).payload, true, 0.0)
              : a.knowledge ? to.machine->accept_knowledge(sender, seq, a.carries, std::move(a.knowledge), true)
                            : to.machine->accept_head(sender, HeadOffer{a.head, a.contributors, a.class_means}, true, 0.0));
    }
  }

  std::vector<RunningMember> members_;
  std::vector<SimNodeResult>& nodes_;
  std::function<void(const std::string&)> say_;
  std::vector<uint64_t> sent_;
  std::vector<std::shared_ptr<const Head>> personal_;
};

// Every node's share of `all`, with what it holds noted in the report.
std::vector<Features> partition_nodes(const FeatureRows& all, const PartitionOptions& options, SimulationReport& report) {
  const int C = all.num_classes, N = options.nodes;
  const Labels labels(all.y, all.y + all.n);
  const Partition partition = make_partition(labels, C, options);
  const auto counts = partition_counts(partition, labels, C);
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
  return local;
}

// Every node's head, and its personal head with personalisation.
struct FederationHeads {
  std::vector<std::shared_ptr<const Head>> heads, personal;
};

// Every node a member of the federation, as a networked node assembles one (node/member.h).
std::vector<RunningMember> simulated_members(const Topology& topology, const std::vector<NodePlan>& plans,
                                             const Method& method, const std::vector<Features>& local,
                                             const Features& test, const SimulationOptions& options,
                                             SimulationReport& report) {
  const int N = static_cast<int>(local.size());
  const auto& say = options.progress;
  const RunId run = simulation_run_id(options.seed);
  const bool masked = options.method.secure_aggregation != SecureAggregation::Off;
  std::map<NodeId, PublicKey> keys;
  if (masked)  // a key pair per node costs, for thousands
    for (int i = 0; i < N; ++i) keys[static_cast<NodeId>(i)] = simulation_identity(options.seed, static_cast<NodeId>(i)).public_key();
  std::vector<RunningMember> members;
  for (int i = 0; i < N; ++i) {
    const auto id = static_cast<NodeId>(i);
    MemberInputs in;
    in.topology = &topology;
    in.plan = plans[i];
    in.method = &method;
    in.options = &options.method;
    in.local = &local[i];
    in.seed = options.seed;
    in.backbone_fingerprint = options.backbone_fingerprint;
    in.num_classes = report.num_classes;
    in.dim = report.dim;
    in.class_names = options.class_names;
    in.image_encoder = options.image_encoder;
    in.noise_key = simulation_noise_key(options.seed);  // a simulation's noise is as public as its seed
    if (masked) in.masks = member_masks(topology, plans[i], options.method, simulation_identity(options.seed, id), id, keys, run);
    if (say)
      in.say = Say([&say, i](LogLevel level, const std::string& line) {
        say("node " + std::to_string(i) + ": " + (level == LogLevel::Warning ? "warning: " : "") + line);
      });
    Member member = assemble_member(std::move(in));
    MachineConfig& m = member.machine;
    m.ctx.progress = say;
    m.ctx.stop = options.stop;
    if (say) m.ctx.watch = &test;
    report.nodes[i].privacy = std::move(member.privacy);
    if (options.on_knowledge)
      m.on_knowledge = [&options, id](NodeId from, const Knowledge& k) { options.on_knowledge(id, from, k); };
    members.push_back(start_member(std::move(member)));
  }
  return members;
}

// One machine per node over the built topology, run to the end; every node's head scored.
FederationHeads run_federation(const std::vector<Features>& local, const Features& test,
                               const SimulationOptions& options, SimulationReport& report) {
  const int N = static_cast<int>(local.size());
  const auto method = make_method(options.method);
  TopologyBuildOptions build;
  build.mode = options.topology;
  build.nodes = N;
  build.seed = options.seed;
  build.method = options.method.method;
  const Topology topology = build_topology(build);
  const std::vector<NodePlan> plans = plan_all(topology, plan_options(options.method));
  const auto& say = options.progress;
  InMemoryFederation federation(simulated_members(topology, plans, *method, local, test, options, report), report.nodes,
                                say);
  federation.run();
  FederationHeads heads;
  // A star's leaves hold the hub's head itself: scored once.
  std::map<const Head*, TestScore> scored;
  for (int i = 0; i < N; ++i) {
    const MachineOutcome& o = federation.machine(i).outcome();
    if (!o.head) throw InputError("node " + std::to_string(i) + " ended without a head in this topology");
    heads.heads.push_back(o.head);
    heads.personal.push_back(federation.personal_head(i));
    auto& r = report.nodes[i];
    auto score = scored.find(o.head.get());
    if (score == scored.end()) score = scored.emplace(o.head.get(), o.head->score(test)).first;
    r.accuracy = score->second.accuracy;
    r.per_class = score->second.per_class;
    r.contributors = o.contributors;
    if (options.on_head) options.on_head(static_cast<NodeId>(i), *o.head, heads.personal.back().get(), o.contributors);
    if (!say) continue;
    std::ostringstream msg;
    msg << "node " << i << ": accuracy " << std::fixed << std::setprecision(4) << r.accuracy << " with "
        << r.contributors.size() << " contributor(s)";
    say(msg.str());
  }
  return heads;
}

// The centralised heads on all the features, and each node's head on its own data alone.
void run_baselines(const Features& all, const std::vector<Features>& local, const Features& test,
                   const SimulationOptions& options, SimulationReport& report) {
  const auto say = [&](const std::string& msg) {
    if (options.progress) options.progress(msg);
  };
  say("baselines: centralised LDA");
  FedCgsOptions lda_options = options.method.fedcgs;
  report.centralized_lda = fit_lda_head(compute_stats(all), lda_options)->accuracy(test);
  say("baselines: centralised linear head on all real features");
  LinearTrainOptions head = options.method.fedpft.head;
  head.seed = derive_seed(options.seed, {static_cast<uint64_t>(Purpose::HeadInit), 0xCE27});
  report.centralized_linear = train_linear_head(all, head)->accuracy(test);
  for (size_t i = 0; i < local.size(); ++i) {
    say("baselines: local-only head of node " + std::to_string(i));
    if (local[i].size() == 0) continue;
    LinearTrainOptions h = head;
    h.seed = derive_seed(options.seed, {static_cast<uint64_t>(Purpose::HeadInit), static_cast<uint64_t>(i)});
    report.nodes[i].local_only_accuracy = train_linear_head(local[i], h)->accuracy(test);
  }
  if (const BaselineFunction& own = method_named(options.method.method).baselines) {
    MethodBaselines b = own(all, local, test, options.method, options.seed, options.progress);
    report.method_baselines = std::move(b.run);
    report.method_baseline_seconds = std::move(b.shared_seconds);
    for (size_t i = 0; i < b.local_only.size() && i < report.nodes.size(); ++i)
      if (b.local_only[i] >= 0) report.nodes[i].local_only_accuracy = b.local_only[i];
  }
  report.has_baselines = true;
}

}  // namespace

// Personalised FedCGS: each node's personal head (trained by its machine, aligned to the class
// means the run brought it) and, as the paper's Local-only baseline, the same model trained on
// its own data alone (lambda = 0, from zero), all scored in the node's own class proportions.
void score_personalization(const std::vector<Features>& local, const Features& test, const FederationHeads& heads,
                           const SimulationOptions& options, SimulationReport& report) {
  for (size_t i = 0; i < local.size(); ++i) {
    auto& r = report.nodes[i];
    if (local[i].size() == 0 || !heads.personal[i]) continue;
    PersonalizeOptions alone = *options.method.fedcgs.personalize;
    alone.seed = personal_seed(options.seed, static_cast<NodeId>(i));
    alone.lambda = 0;
    alone.from_global_head = false;  // and so the paper's learning rate and epochs, unless given
    std::vector<bool> present;
    const MatrixD own_means = global_class_means(compute_stats(local[i]), &present);  // unused at lambda 0
    const auto t0 = Clock::now();
    const auto own = personalize_head(local[i], own_means, present, alone);
    r.personalized.local_only = accuracy_in_proportion(own->per_class_accuracy(test), r.class_counts);
    r.personalized.global = accuracy_in_proportion(r.per_class, r.class_counts);
    r.personalized.personal = accuracy_in_proportion(heads.personal[i]->per_class_accuracy(test), r.class_counts);
    if (options.progress) {
      char line[160];
      std::snprintf(line, sizeof line, "node %zu: in its own proportions local-only %.4f, FedCGS %.4f, personalised %.4f (%.1f s)",
                    i, r.personalized.local_only, r.personalized.global, r.personalized.personal, seconds_since(t0));
      options.progress(line);
    }
  }
}

SimulationReport simulate(const FeatureRows& train, const Features& test, const SimulationOptions& options) {
  const auto t_start = Clock::now();
  train.validate("training features");
  test.validate("test features");
  if (train.d != test.dim())
    throw InputError("training features have dimension " + std::to_string(train.d) +
                     ", test features " + std::to_string(test.dim()));
  const int C = std::max(train.num_classes, test.num_classes);
  const int N = options.partition.nodes;
  if (N < 1) throw InputError("the federation needs at least one node");
  if (options.topology == TopologyMode::Star && N < 2)
    throw InputError("a star needs a hub and at least one leaf (--nodes >= 2)");
  FeatureRows all = train;  // lent: only the nodes' shares (and the centralised baselines) copy rows
  all.num_classes = C;
  Features widened_test;
  const Features& test_all = test.num_classes == C ? test : widened_test;
  if (test.num_classes != C) {
    widened_test = test;
    widened_test.num_classes = C;
  }
  SimulationReport report;
  report.options = options;
  report.train_samples = all.n;
  report.test_samples = test_all.size();
  report.dim = all.d;
  report.num_classes = C;
  const std::vector<Features> local = partition_nodes(all, options.partition, report);
  const FederationHeads heads = run_federation(local, test_all, options, report);
  if (options.method.fedcgs.personalize && options.method.method == "fedcgs")
    score_personalization(local, test_all, heads, options, report);
  if (options.baselines) run_baselines(all.copy(), local, test_all, options, report);
  report.wall_seconds = seconds_since(t_start);
  return report;
}

SimulationReport simulate(const Features& train, const Features& test, const SimulationOptions& options) {
  if (static_cast<size_t>(train.X.rows()) != train.y.size()) train.validate("training features");
  return simulate(train.rows(), test, options);
}

}  // namespace fednode
