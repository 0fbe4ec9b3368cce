// One simulation repeated over several seeds, and the spread of its accuracies. The papers report
// every accuracy as a mean over seeds with its standard deviation, and a gap to the centralised
// head means something only next to how far it moves from one seed to the next.
#pragma once

#include "node/simulator.h"

#include <cstdint>
#include <iosfwd>
#include <vector>

namespace fednode {

// Mean and sample standard deviation (n - 1) of a list of values; sd is NaN below two values,
// both are NaN for none.
struct MeanSd {
  double mean = 0, sd = 0;
  int count = 0;
};
MeanSd mean_sd(const std::vector<double>& values);

struct SeedSweepNode {
  NodeId id = 0;
  MeanSd accuracy;
  MeanSd minus_centralized_linear;  // per seed: accuracy - centralized.linear of that seed
  MeanSd local_only;
};

struct SeedSweepReport {
  std::vector<uint64_t> seeds;
  std::vector<SimulationReport> runs;  // one per seed, in the order of `seeds`
  std::vector<SeedSweepNode> nodes;
  bool has_baselines = false;
  MeanSd centralized_linear, centralized_lda;
  double wall_seconds = 0;
};

// Runs `simulate` once per seed; every run is exactly the run `options` with that seed gives
// (partition, initialisations, samples and heads all derive from it). Seeds must be distinct.
SeedSweepReport simulate_seeds(const FeatureRows& train, const Features& test, SimulationOptions options,
                               const std::vector<uint64_t>& seeds);

// The JSON report (schema in docs/report.md): the summary, then every run's full report.
void write_seed_sweep_json(const SeedSweepReport& report, std::ostream& out);
// A short table for humans: one line per seed, then mean and sd per node.
void print_seed_sweep_table(const SeedSweepReport& report, std::ostream& out);

}  // namespace fednode
