// The cost of secure aggregation (issue 21, acceptance 5; docs/privacy.md), each as a ratio to
// the plain run measured in the same run on the same data.
// First, on a star, the parts: per leaf, its statistics masked for the hub (compute_stats,
// encoding into the ring, one ChaCha20 mask stream per other leaf) against the plain statistics;
// at the hub, folding the masked pieces and reading the sum back before the LDA head against
// folding plain ones; and the bytes a leaf sends (the encoded payload).
// Then whole runs in the simulator (node/simulator.h: every node's machine, its merges, masks,
// heads and unmasking round), a star of L leaves and a chain of --chain nodes: per node its
// compute time and the bytes it sends, where a chain under secure aggregation also makes the
// second pass that brings every node the total.
// Usage: bench_secagg [--leaves 10] [--chain 5] [--dim 1280] [--classes 10] [--n 2000] [--reps 3]
#include "crypto/run_id.h"
#include "methods/fedcgs/fedcgs.h"
#include "methods/fedcgs/masked_stats.h"
#include "node/secure_aggregation.h"
#include "node/simulator.h"
#include "protocol/codec.h"
#include "core/rng.h"

#include "bench_common.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace fednode;

namespace {

Features leaf_data(int n, int d, int classes, uint64_t seed) {
  Rng rng(seed);
  Features f;
  f.num_classes = classes;
  f.X.resize(n, d);
  f.y.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng.below(static_cast<uint64_t>(classes)));
    f.y[static_cast<size_t>(i)] = c;
    for (int j = 0; j < d; ++j) f.X(i, j) = static_cast<float>(rng.normal() + (j % classes == c ? 1.0 : 0.0));
  }
  return f;
}

// Per node, the median over repetitions of its compute seconds, and its bytes sent.
struct RunCost {
  std::vector<double> seconds;
  std::vector<double> bytes;
  std::vector<double> accuracy;
};

RunCost whole_run(const Features& train, const Features& test, SimTopology topology, int nodes, bool masked, int reps) {
  SimulationOptions o;
  o.method.method = "fedcgs";
  o.method.secure_aggregation = masked ? SecureAggregation::All : SecureAggregation::Off;
  o.topology = topology;
  o.partition.nodes = nodes;
  o.partition.seed = 1;
  o.seed = 1;
  o.baselines = false;
  RunCost cost;
  std::vector<std::vector<double>> seconds(static_cast<size_t>(nodes));
  for (int r = 0; r < reps; ++r) {
    const SimulationReport report = simulate(train, test, o);
    cost.bytes.clear();
    cost.accuracy.clear();
    for (const auto& node : report.nodes) {
      seconds[node.id].push_back(node.seconds);
      cost.bytes.push_back(static_cast<double>(node.bytes_sent));
      cost.accuracy.push_back(node.accuracy);
    }
  }
  for (auto& s : seconds) cost.seconds.push_back(bench::median(s));
  return cost;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Prints the per-node table of one topology; false when secure aggregation changed an accuracy
// other than a chain's partial heads, which it replaces with the total's.
bool report_whole_run(const char* name, const RunCost& plain, const RunCost& masked, bool chain) {
  std::printf("\n%s, whole run in the simulator (per node: compute seconds, bytes sent, accuracy)\n", name);
  std::printf("%-6s %9s %9s %7s %12s %12s %7s %8s %8s\n", "node", "plain s", "masked s", "ratio", "plain B", "masked B",
              "ratio", "plain", "masked");
  for (size_t i = 0; i < plain.seconds.size(); ++i)
    std::printf("%-6zu %9.3f %9.3f %7.2f %12.0f %12.0f %7s %8.4f %8.4f\n", i, plain.seconds[i], masked.seconds[i],
                masked.seconds[i] / plain.seconds[i], plain.bytes[i], masked.bytes[i],
                plain.bytes[i] > 0 ? (std::to_string(masked.bytes[i] / plain.bytes[i]).substr(0, 4)).c_str() : "-",
                plain.accuracy[i], masked.accuracy[i]);
  const double ps = mean(plain.seconds), ms = mean(masked.seconds), pb = mean(plain.bytes), mb = mean(masked.bytes);
  std::printf("%-6s %9.3f %9.3f %7.2f %12.0f %12.0f %7.2f\n", "mean", ps, ms, ms / ps, pb, mb, mb / pb);
  const double total = chain ? plain.accuracy.back() : 0;
  for (size_t i = 0; i < plain.accuracy.size(); ++i)
    if (masked.accuracy[i] != (chain ? total : plain.accuracy[i])) return false;
  return true;
}

}  // namespace

int bench_main(int argc, char** argv) {
  int leaves = 10, chain = 5, d = 1280, classes = 10, n = 2000, reps = 3;
  if (bench::wants_help(argc, argv)) {
    std::printf("usage: bench_secagg [--leaves 10] [--chain 5] [--dim 1280] [--classes 10] [--n 2000] [--reps 3]\n");
    return 0;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    int* into = flag == "--leaves" ? &leaves : flag == "--chain" ? &chain : flag == "--dim" ? &d : flag == "--classes" ? &classes
              : flag == "--n" ? &n : flag == "--reps" ? &reps : nullptr;
    if (!into) {
      std::fprintf(stderr, "bench_secagg: unknown option %s\n", flag.c_str());
      return 2;
    }
    *into = bench::parse_int("bench_secagg", flag.c_str(), argv[i + 1]);
  }
  if (leaves < 2 || chain < 3) {
    std::fprintf(stderr, "bench_secagg: --leaves needs at least 2, --chain at least 3\n");
    return 2;
  }
  // Leaves 1..L of a star whose hub is 0; key pairs from fixed seeds.
  std::map<NodeId, PublicKey> keys;
  std::vector<Identity> ids;
  for (int i = 0; i <= leaves; ++i) {
    std::array<uint8_t, 32> seed{};
    seed[0] = static_cast<uint8_t>(i);
    seed[1] = static_cast<uint8_t>(i >> 8);
    seed[2] = 0xb5;
    ids.push_back(Identity::from_seed(seed));
    keys[static_cast<NodeId>(i)] = ids.back().public_key();
  }
  const RunId run = derive_run_id("bench_secagg");
  // As in a run: every leaf adds its pair masks and a self mask, and the hub removes the self
  // masks with the seeds of the unmasking round (no leaf dropped here).
  MaskPlan plan;
  for (int i = 1; i <= leaves; ++i) plan.group.insert(static_cast<NodeId>(i));
  plan.unmasking_round = true;
  std::vector<MaskSecrets> secrets(static_cast<size_t>(leaves) + 1);
  UnmaskRequest round{plan.group, {}};
  std::map<NodeId, UnmaskReply> replies;
  for (int i = 1; i <= leaves; ++i) {
    secrets[static_cast<size_t>(i)] = mask_secrets(ids[static_cast<size_t>(i)], static_cast<NodeId>(i), plan, keys, run);
    replies[static_cast<NodeId>(i)] = unmask_reply(round, secrets[static_cast<size_t>(i)]);
  }
  MaskPlan hub_plan = plan;
  hub_plan.member = false;
  std::vector<Features> data;
  for (int i = 1; i <= leaves; ++i) data.push_back(leaf_data(n, d, classes, 100 + static_cast<uint64_t>(i)));

  std::printf("star of %d leaves, d = %d, %d classes, %d samples per leaf, median of %d\n", leaves, d, classes, n, reps);
  compute_stats(data[0]);  // a first call pays for BLAS's start-up, which neither side should
  std::vector<double> plain_leaf, masked_leaf, plain_hub, masked_hub;
  std::vector<Knowledge> plain_pieces, masked_pieces;
  for (int r = 0; r < reps; ++r) {
    plain_pieces.clear();
    masked_pieces.clear();
    // Leaf 1's cost stands for every leaf's (each masks with L - 1 others).
    const auto method = make_fedcgs(FedCgsOptions{});
    auto leaf = [&](int i, bool masked) {
      NodeContext ctx;
      ctx.node = static_cast<NodeId>(i);
      ctx.backbone_fingerprint = "bench";
      ctx.num_classes = classes;
      ctx.dim = d;
      if (masked) ctx.masking = local_masking(ctx.node, plan, secrets[static_cast<size_t>(i)]);
      return ctx;
    };
    const NodeContext plain1 = leaf(1, false), masked1 = leaf(1, true);
    plain_leaf.push_back(bench::seconds([&] { plain_pieces.push_back(method->summarize(data[0], plain1)); }));
    masked_leaf.push_back(bench::seconds([&] { masked_pieces.push_back(method->summarize(data[0], masked1)); }));
    for (int i = 2; i <= leaves; ++i) {
      plain_pieces.push_back(method->summarize(data[static_cast<size_t>(i - 1)], leaf(i, false)));
      masked_pieces.push_back(method->summarize(data[static_cast<size_t>(i - 1)], leaf(i, true)));
    }
    NodeContext hub;
    hub.node = 0;
    hub.backbone_fingerprint = "bench";
    hub.num_classes = classes;
    hub.dim = d;
    std::vector<Labels> predictions(2);
    plain_hub.push_back(bench::seconds([&] {
      predictions[0] = method->fit_head(KnowledgeList(plain_pieces), nullptr, hub)->predict(data[0].X);
    }));
    NodeContext masked_hub_ctx = hub;
    masked_hub_ctx.unmasking = unmasking(hub_plan, round, replies);
    masked_hub.push_back(bench::seconds([&] {
      predictions[1] = method->fit_head(KnowledgeList(masked_pieces), nullptr, masked_hub_ctx)->predict(data[0].X);
    }));
    if (predictions[0] != predictions[1]) {
      std::fprintf(stderr, "bench_secagg: the masked run predicts otherwise than the plain one\n");
      return 1;
    }
  }
  const double bytes_plain = static_cast<double>(encode_payload(plain_pieces[0]).size());
  const double bytes_masked = static_cast<double>(encode_payload(masked_pieces[0]).size());
  const double pl = bench::median(plain_leaf), ml = bench::median(masked_leaf);
  const double ph = bench::median(plain_hub), mh = bench::median(masked_hub);
  std::printf("%-34s %12s %12s %8s\n", "", "plain", "masked", "ratio");
  std::printf("%-34s %12.3f %12.3f %8.2f\n", "leaf: statistics to send (s)", pl, ml, ml / pl);
  std::printf("%-34s %12.3f %12.3f %8.2f\n", "hub: all pieces to a head (s)", ph, mh, mh / ph);
  std::printf("%-34s %12.0f %12.0f %8.2f\n", "leaf: payload bytes", bytes_plain, bytes_masked, bytes_masked / bytes_plain);
  std::printf("predictions of the two heads: identical\n");

  // Whole runs: the star's hub holds data too (n samples a node, as every leaf), test set n.
  auto pooled = [&](int nodes, uint64_t seed) {
    Features f = leaf_data(n * nodes, d, classes, seed);
    return f;
  };
  const Features test = leaf_data(n, d, classes, 7);
  const Features star_train = pooled(leaves + 1, 8);
  const bool star_same = report_whole_run(("star of " + std::to_string(leaves) + " leaves").c_str(),
                                          whole_run(star_train, test, SimTopology::Star, leaves + 1, false, reps),
                                          whole_run(star_train, test, SimTopology::Star, leaves + 1, true, reps), false);
  const Features chain_train = pooled(chain, 9);
  const bool chain_same = report_whole_run(("chain of " + std::to_string(chain)).c_str(),
                                           whole_run(chain_train, test, SimTopology::Linear, chain, false, reps),
                                           whole_run(chain_train, test, SimTopology::Linear, chain, true, reps), true);
  if (!star_same || !chain_same) {
    std::fprintf(stderr, "bench_secagg: a masked run's accuracy differs from the plain run's\n");
    return 1;
  }
  std::printf("accuracies: the star's as plain, every chain node's the plain tail's\n");
  return 0;
}

int main(int argc, char** argv) {
  return fednode::bench::guarded("bench_secagg", [&] { return bench_main(argc, argv); });
}
