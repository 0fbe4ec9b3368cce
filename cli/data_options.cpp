#include "cli/data_options.h"

#include "features/allocator.h"
#include "features/extract.h"
#include "features/idx.h"
#include "features/npy.h"

#include <algorithm>

namespace fednode::cli {

const std::set<std::string>& data_option_names() {
  static const std::set<std::string> v = {"dataset",     "train-features", "train-labels",
                                          "test-features", "test-labels",  "train-limit",
                                          "test-limit",  "num-classes",    "backbone-fingerprint",
                                          "backbone",    "input-size",     "threads-extract",
                                          "feature-expansion", "feature-expansion-seed"};
  return v;
}

const std::set<std::string>& partition_option_names() {
  static const std::set<std::string> v = {"partition", "dirichlet-alpha", "min-samples", "classes-per-node"};
  return v;
}

LoadedData load_data(const Args& a, bool quiet) {
  LoadedData d;
  d.fingerprint = a.str("backbone-fingerprint", "pixels");
  const int64_t train_limit = a.integer("train-limit", -1, -1, 1LL << 40);
  const int64_t test_limit = a.integer("test-limit", -1, -1, 1LL << 40);
  if (a.has("dataset")) {
    if (a.has("train-features") || a.has("test-features"))
      throw UsageError("give either --dataset or the four .npy files, not both");
    const std::string name = a.str("dataset", "");
    if (name != "fashion-mnist") throw UsageError("--dataset must be fashion-mnist, got '" + name + "'");
    if (a.has("backbone")) {
      if (a.has("backbone-fingerprint"))
        throw UsageError("--backbone sets the fingerprint itself; drop --backbone-fingerprint");
      ExtractOptions x;
      const std::string model = a.required("backbone");
      x.backbone = model == "default" ? "" : model;
      x.dataset = name;
      x.input_size = static_cast<int>(a.integer("input-size", 0, 0, 4096));
      x.threads = static_cast<int>(a.integer("threads-extract", 0, 0, 1024));
      x.progress = !quiet;
      x.split = "train";
      x.limit = train_limit;
      BatchAllocations batch_buffers;
      const Extracted tr = extract_features(x);
      x.split = "test";
      x.limit = test_limit;
      const Extracted te = extract_features(x);
      d.train = tr.features;
      d.test = te.features;
      d.fingerprint = tr.fingerprint;
      d.description = "fashion-mnist through backbone " + tr.fingerprint.substr(0, 12) + " (" +
                      std::to_string(d.train.size()) + " train, " + std::to_string(d.test.size()) + " test)";
    } else {
      d.train = load_fashion_mnist(default_fashion_mnist_dir(), "train", train_limit);
      d.test = load_fashion_mnist(default_fashion_mnist_dir(), "test", test_limit);
      d.description = "fashion-mnist pixels (" + std::to_string(d.train.size()) + " train, " +
                      std::to_string(d.test.size()) + " test)";
    }
  } else {
    if (a.has("backbone"))
      throw UsageError("--backbone extracts from --dataset; .npy inputs are features already");
    const int classes = static_cast<int>(a.integer("num-classes", 0, 0, 1 << 20));
    d.train = load_npy_dataset(a.required("train-features"), a.required("train-labels"), classes);
    d.test = load_npy_dataset(a.required("test-features"), a.required("test-labels"), classes);
    d.train = d.train.first(train_limit);
    d.test = d.test.first(test_limit);
    d.description = a.required("train-features");
  }
  const int C = std::max(d.train.num_classes, d.test.num_classes);
  d.train.num_classes = d.test.num_classes = C;
  d.expansion.dim = static_cast<int>(a.integer("feature-expansion", 0, 0, kMaxExpansionDim));
  d.expansion.seed = static_cast<uint64_t>(a.integer("feature-expansion-seed", 1, 0, (1LL << 62)));
  if (a.has("feature-expansion-seed") && !d.expansion.enabled())
    throw UsageError("--feature-expansion-seed needs --feature-expansion D");
  if (d.expansion.enabled()) {
    d.fingerprint = expanded_fingerprint(d.fingerprint, d.expansion);
    d.description += ", expanded to " + std::to_string(d.expansion.dim) + " by a ReLU random projection (seed " +
                     std::to_string(d.expansion.seed) + ")";
  }
  return d;
}

PartitionOptions parse_partition_options(const Args& a, int nodes, uint64_t seed) {
  PartitionOptions p;
  p.nodes = nodes;
  p.seed = seed;
  p.scheme = parse_partition_scheme(a.str("partition", "iid"));
  p.dirichlet_alpha = a.real("dirichlet-alpha", p.dirichlet_alpha, 1e-6, 1e6);
  p.min_samples = static_cast<int>(a.integer("min-samples", p.min_samples, 0, 1LL << 40));
  p.classes_per_node = static_cast<int>(a.integer("classes-per-node", p.classes_per_node, 1, 1 << 20));
  return p;
}

}  // namespace fednode::cli
