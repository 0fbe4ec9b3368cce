// Where a command's features come from, and how they are split among nodes: the options that
// `fednode simulate` takes on the command line and that topology files give in
// [federation.data] (docs/topologies.md), parsed by one piece of code for both.
#pragma once

#include "cli/args.h"
#include "features/partition.h"
#include "methods/types.h"

#include <set>
#include <string>

namespace fednode::cli {

const std::set<std::string>& data_option_names();       // dataset, .npy files, limits, backbone
const std::set<std::string>& partition_option_names();  // partition, dirichlet-alpha, ...

struct LoadedData {
  Features train, test;
  std::string fingerprint = "pixels";  // the backbone's, or --backbone-fingerprint
  std::string description;             // for reports
};

// Reads --dataset (optionally through --backbone) or the four .npy files, applies the limits,
// and gives both splits the same class count. Throws UsageError/InputError.
LoadedData load_data(const Args& a, bool quiet);

// The partition scheme and its parameters for `nodes` nodes drawn from `seed`.
PartitionOptions parse_partition_options(const Args& a, int nodes, uint64_t seed);

}  // namespace fednode::cli
