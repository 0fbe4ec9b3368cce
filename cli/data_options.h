// Where a command's features come from, and how they are split among nodes: the options that
// `fednode simulate` takes on the command line and that topology files give in
// [federation.data] (docs/topologies.md), parsed by one piece of code for both.
#pragma once

#include "cli/args.h"
#include "features/expansion.h"
#include "features/partition.h"
#include "methods/types.h"

#include <set>
#include <string>

namespace fednode::cli {

const std::set<std::string>& data_option_names();       // dataset, .npy files, limits, backbone
const std::set<std::string>& partition_option_names();  // partition, dirichlet-alpha, ...

struct LoadedData {
  Features train, test;                // the backbone's features, not yet expanded
  // --feature-expansion D [--feature-expansion-seed S]: what every node applies to the rows it
  // keeps (expand_features), after partitioning, so that no node expands rows it then drops.
  FeatureExpansion expansion;
  std::string fingerprint = "pixels";  // of the features the federation works on, expansion included
  std::string description;             // for reports
};

// Reads --dataset (optionally through --backbone) or the four .npy files, applies the limits,
// gives both splits the same class count, and reads the expansion. Throws UsageError/InputError.
LoadedData load_data(const Args& a, bool quiet);

// The partition scheme and its parameters for `nodes` nodes drawn from `seed`.
PartitionOptions parse_partition_options(const Args& a, int nodes, uint64_t seed);

}  // namespace fednode::cli
