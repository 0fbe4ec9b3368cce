// Splitting one labelled dataset among federation nodes, as the papers' experiments do.
// Every scheme is seeded through Rng::stream(seed, Purpose::Partition, scheme) and gives the
// same partition for the same labels, options and seed on every machine.
#pragma once

#include "core/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fednode {

enum class PartitionScheme { Iid, Dirichlet, Shards, Labels, Dominant };

// "iid", "dirichlet", "shards", "labels", "dominant"; InputError otherwise.
PartitionScheme parse_partition_scheme(const std::string& s);
const char* to_string(PartitionScheme scheme);

struct PartitionOptions {
  PartitionScheme scheme = PartitionScheme::Iid;
  int nodes = 10;
  double dirichlet_alpha = 0.5;  // Dirichlet: smaller is more skewed
  int min_samples = 10;          // Dirichlet: redraw until every node holds at least this many
  int classes_per_node = 2;      // Shards: classes per node (FedTC's delta); Dominant: dominant classes
  double uniform_share = 0.2;    // Dominant: the share of a node's data drawn from every class (s%)
  uint64_t seed = 0;
};

// Per node, the sorted row indices into the dataset it holds. Every row is in exactly one node.
using Partition = std::vector<std::vector<int64_t>>;

// iid: shuffle, split into near-equal parts.
// dirichlet: per class, proportions ~ Dir(alpha) over nodes split the class's shuffled rows
//   (the FedCGS / FedPFT reference code, including its cap that stops giving to nodes already
//   above n/nodes); redrawn until every node holds min_samples, up to a bounded number of tries.
// shards: every node holds classes_per_node distinct classes, every class is held by someone when
//   nodes * classes_per_node >= classes, and a class's rows are split evenly among its holders.
// labels: classes split into `nodes` disjoint groups; a node holds every row of its classes.
// dominant: the personalised-FL partition of the FedCGS paper (after Zhang et al. 2020): every node
//   gets the same number of rows, n / nodes, uniform_share of them spread evenly over every class
//   and the rest over its classes_per_node dominant classes (chosen as shards chooses); a class
//   whose rows run out gives what it has left.
// Only classes that occur in y are handed out by shards and labels.
Partition make_partition(const Labels& y, int num_classes, const PartitionOptions& opt);

// counts[node][class]: how many rows of each class every node holds.
std::vector<std::vector<int64_t>> partition_counts(const Partition& p, const Labels& y,
                                                   int num_classes);

// A table of samples per node per class, with per-node totals, class count, and a totals row.
std::string format_partition_summary(const std::vector<std::vector<int64_t>>& counts);

}  // namespace fednode
