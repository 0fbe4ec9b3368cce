// Where a command's features come from, and how they are split among nodes: the options that
// `fednode simulate` takes on the command line and that topology files give in
// [federation.data] (docs/topologies.md), parsed by one piece of code for both.
#pragma once

#include "core/image_encoder.h"
#include "core/options.h"
#include "features/expansion.h"
#include "features/feature_recipe.h"
#include "features/partition.h"
#include "core/types.h"

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace fednode {

const std::set<std::string>& data_option_names();       // dataset, .npy files, limits, backbone
const std::set<std::string>& partition_option_names();  // partition, dirichlet-alpha, ...

struct LoadedData {
  Features train, test;                // the backbone's features, not yet expanded
  // --feature-expansion D [--feature-expansion-seed S]: what every node applies to the rows it
  // keeps (expand_features), after partitioning, so that no node expands rows it then drops.
  FeatureExpansion expansion;
  std::string fingerprint = "pixels";  // of the features the federation works on, expansion included
  std::string description;             // for reports
  // Label i's name where the data names its classes: Fashion-MNIST's, or PREFIX_classes.txt beside
  // PREFIX_X.npy (what `fednode extract` writes); empty otherwise.
  std::vector<std::string> class_names;
  // What turns an image into these features (--dataset: the backbone or the pixels, then the
  // expansion): what FGL's receiver reads its synthetic images through. Null for .npy features,
  // whose images fednode never saw.
  std::shared_ptr<const ImageEncoder> encoder;
  // The same as a record a head file keeps (features/feature_recipe.h), so that new images can be
  // classified the way these were computed.
  FeatureRecipe recipe;
  // Training rows lent by the caller (DataSettings::lent), read in place; `train` is then empty.
  FeatureRows lent_train;

  // The training rows to federate: the lent ones, or train's own.
  FeatureRows train_rows() const { return lent_train.X ? lent_train : train.rows(); }
};

// Every data option, parsed and checked, nothing read yet: what `fednode topology --data`
// checks, and what load_data reads.
struct DataSettings {
  std::string dataset;                 // "fashion-mnist", or empty for the four .npy files
  std::string train_features, train_labels, test_features, test_labels;
  int classes = 0;                     // --num-classes for .npy labels; 0: from the labels
  int64_t train_limit = -1, test_limit = -1;
  std::string backbone;                // --backbone (with --dataset): a model file or "default"
  int input_size = 0, threads_extract = 0;
  std::string fingerprint;             // before any expansion
  FeatureExpansion expansion;
  // Data the caller holds (the Python module's NumPy arrays) instead of files: the training rows
  // are read in place, the test rows copied. Set by the caller, not parsed; `class_names` names
  // their labels (empty: unnamed).
  struct Lent {
    FeatureRows train, test;
    std::vector<std::string> class_names;
  };
  std::optional<Lent> lent;
};
// Throws UsageError naming the option for a bad value, a missing input (unless !need_source:
// a topology file's nodes may get their files elsewhere), or an option that would be ignored
// (--input-size without --backbone, --num-classes with --dataset).
DataSettings parse_data_settings(const Args& a, bool need_source = true);

// Reads --dataset (optionally through --backbone) or the four .npy files, applies the limits,
// gives both splits the same class count, and reads the expansion. Throws UsageError/InputError,
// and Interrupted when `stop` becomes true during a backbone's extraction.
// Features wider than `max_dim` (what a message may carry, Limits::max_dim) are refused.
LoadedData load_data(const DataSettings& settings, uint32_t max_dim, bool quiet, const std::atomic<bool>* stop = nullptr);
LoadedData load_data(const Args& a, uint32_t max_dim, bool quiet, const std::atomic<bool>* stop = nullptr);

// The partition scheme and its parameters for `nodes` nodes drawn from `seed`.
PartitionOptions parse_partition_options(const Args& a, int nodes, uint64_t seed);

}  // namespace fednode
