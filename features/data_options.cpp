#include "features/data_options.h"

#include "features/allocator.h"
#include "features/data_encoder.h"
#include "features/extract.h"
#include "features/idx.h"
#include "features/npy.h"

#include <algorithm>

namespace fednode {

const std::set<std::string>& data_option_names() {
  static const std::set<std::string> v = {"dataset",     "train-features", "train-labels",
                                          "test-features", "test-labels",  "train-limit",
                                          "test-limit",  "num-classes",    "backbone-fingerprint",
                                          "backbone",    "input-size",     "threads-extract",
                                          "feature-expansion", "feature-expansion-seed"};
  return v;
}

const std::set<std::string>& partition_option_names() {
  static const std::set<std::string> v = {"partition", "dirichlet-alpha", "min-samples", "classes-per-node",
                                          "uniform-share"};
  return v;
}

DataSettings parse_data_settings(const Args& a, bool need_source) {
  DataSettings d;
  // Absent: every sample (-1).
  d.train_limit = a.integer("train-limit", -1, 1, 1LL << 40);
  d.test_limit = a.integer("test-limit", -1, 1, 1LL << 40);
  if (a.has("dataset")) {
    if (a.has("train-features") || a.has("test-features") || a.has("train-labels") || a.has("test-labels"))
      throw UsageError("give either --dataset or the four .npy files, not both");
    d.dataset = a.str("dataset", "");
    if (d.dataset != "fashion-mnist") throw UsageError("--dataset must be fashion-mnist, got '" + d.dataset + "'");
    if (a.has("num-classes"))
      throw UsageError("--num-classes is for .npy labels; --dataset fashion-mnist has its 10 classes");
  } else {
    d.classes = static_cast<int>(a.integer("num-classes", 0, 0, 1 << 20));
    for (const char* file : {"train-features", "train-labels", "test-features", "test-labels"})
      if (!a.has(file) && need_source)
        throw UsageError("missing --" + std::string(file) + ": give --dataset fashion-mnist, or all four of " +
                         "--train-features, --train-labels, --test-features and --test-labels");
    d.train_features = a.str("train-features", "");
    d.train_labels = a.str("train-labels", "");
    d.test_features = a.str("test-features", "");
    d.test_labels = a.str("test-labels", "");
  }
  if (a.has("backbone")) {
    if (a.has("backbone-fingerprint"))
      throw UsageError("--backbone sets the fingerprint itself; drop --backbone-fingerprint");
    d.backbone = a.required("backbone");
    d.input_size = static_cast<int>(a.integer("input-size", 0, 0, 4096));
    d.threads_extract = static_cast<int>(a.integer("threads-extract", 0, 0, 1024));
    if (d.dataset.empty() && a.has("threads-extract"))
      throw UsageError("--threads-extract sets up --dataset's extraction; .npy features are extracted already");
  } else {
    for (const char* extraction : {"input-size", "threads-extract"})
      if (a.has(extraction))
        throw UsageError("--" + std::string(extraction) + " sets up the backbone's extraction; it needs --backbone");
  }
  // Features from .npy files come from a model fednode cannot see: named only if the user names it.
  d.fingerprint = a.str("backbone-fingerprint", d.dataset.empty() ? "unnamed" : "pixels");
  d.expansion.dim = static_cast<int>(a.integer("feature-expansion", 0, 0, kMaxExpansionDim));
  d.expansion.seed = static_cast<uint64_t>(a.integer("feature-expansion-seed", 1, 0, (1LL << 62)));
  if (a.has("feature-expansion-seed") && !d.expansion.enabled())
    throw UsageError("--feature-expansion-seed needs --feature-expansion D");
  return d;
}

namespace {

// The encoder of features that came through the backbone --backbone names.
std::shared_ptr<const ImageEncoder> encoder_of(const DataSettings& s, const BackboneFile& file) {
  BackboneOptions run;
  run.threads = s.threads_extract;
  return backbone_encoder(file.model, file.preprocessing, run, s.expansion);
}

// Features extracted before fednode saw them (.npy files, arrays): --backbone names the model they
// came from, which names them and reads images; otherwise --backbone-fingerprint names them.
void name_extracted_features(const DataSettings& s, const std::string& where, LoadedData& d) {
  if (s.backbone.empty()) {
    d.recipe.backbone_fingerprint = s.fingerprint;
    d.recipe.expansion = s.expansion;
    return;
  }
  const BackboneFile file = open_backbone_file(s.backbone == "default" ? "" : s.backbone, s.input_size);
  const int64_t out = file.preprocessing.output_dim;
  const int dim = d.train_rows().d;
  if (out != 0 && (dim != out || d.test.dim() != out))
    throw InputError(where + ": features of " + std::to_string(dim) + " dimensions, but " + file.model + " gives " +
                     std::to_string(out) + " (--backbone names the model they came from)");
  d.fingerprint = backbone_fingerprint(file.model, file.preprocessing);
  d.encoder = encoder_of(s, file);
  d.recipe = backbone_recipe(file.model, file.preprocessing, s.expansion);
}

}  // namespace

LoadedData load_data(const DataSettings& s, uint32_t max_dim, bool quiet, const std::atomic<bool>* stop) {
  LoadedData d;
  d.fingerprint = s.fingerprint;
  if (!s.dataset.empty() && !s.backbone.empty()) {
    ExtractOptions x;
    x.backbone = s.backbone == "default" ? "" : s.backbone;
    x.dataset = s.dataset;
    x.input_size = s.input_size;
    x.threads = s.threads_extract;
    x.progress = !quiet;
    x.stop = stop;
    x.split = "train";
    x.limit = s.train_limit;
    BatchAllocations batch_buffers;
    const Extracted tr = extract_features(x);
    x.split = "test";
    x.limit = s.test_limit;
    const Extracted te = extract_features(x);
    d.train = tr.features;
    d.test = te.features;
    d.fingerprint = tr.fingerprint;
    d.class_names = tr.class_names;
    const BackboneFile file = open_backbone_file(x.backbone, s.input_size);
    d.encoder = encoder_of(s, file);
    d.recipe = backbone_recipe(file.model, file.preprocessing, s.expansion);
    d.description = "fashion-mnist through backbone " + tr.fingerprint.substr(0, 12) + " (" +
                    std::to_string(d.train.size()) + " train, " + std::to_string(d.test.size()) + " test)";
  } else if (!s.dataset.empty()) {
    d.train = load_fashion_mnist(default_fashion_mnist_dir(), "train", s.train_limit);
    d.test = load_fashion_mnist(default_fashion_mnist_dir(), "test", s.test_limit);
    d.class_names = fashion_mnist_class_names();
    d.encoder = pixel_encoder(s.expansion);
    d.recipe = fashion_mnist_pixel_recipe(s.expansion);
    d.description = "fashion-mnist pixels (" + std::to_string(d.train.size()) + " train, " +
                    std::to_string(d.test.size()) + " test)";
  } else if (s.lent) {
    d.lent_train = s.lent->train.first(s.train_limit);
    d.test = s.lent->test.first(s.test_limit).copy();
    // As for .npy labels: --num-classes, or what the labels imply (refused when absurd).
    d.lent_train.num_classes = s.classes > 0 ? s.classes : infer_num_classes(d.lent_train.y, d.lent_train.n, "train: y", "--num-classes");
    d.test.num_classes = s.classes > 0 ? s.classes : infer_num_classes(d.test.y.data(), d.test.size(), "test: y", "--num-classes");
    d.description = "arrays (" + std::to_string(d.lent_train.n) + " train, " + std::to_string(d.test.size()) + " test)";
    d.class_names = s.lent->class_names;
    name_extracted_features(s, d.description, d);
  } else {
    d.train = load_npy_dataset(s.train_features, s.train_labels, s.classes);
    d.test = load_npy_dataset(s.test_features, s.test_labels, s.classes);
    d.train = d.train.first(s.train_limit);
    d.test = d.test.first(s.test_limit);
    d.description = s.train_features;
    d.class_names = class_names_beside(s.train_features);
    name_extracted_features(s, s.train_features, d);
  }
  // Every head is scored on the test set: an empty one would report an accuracy of 0.
  if (d.test.size() == 0)
    throw InputError(d.description + ": the test set holds no samples (" +
                     (s.lent ? std::string("the test array") : s.test_features.empty() ? std::string("--test-limit") : s.test_labels) +
                     "), so no head could be scored");
  const int C = std::max(d.train_rows().num_classes, d.test.num_classes);
  d.train.num_classes = d.test.num_classes = C;
  if (d.lent_train.X) d.lent_train.num_classes = C;
  const int dim = d.train_rows().d;
  // Nodes exchange at most max_dim dimensions, and FedCGS's statistics grow with its square:
  // wider features would run out of memory long before a message could carry them.
  if (dim > static_cast<int>(max_dim) || d.test.dim() > static_cast<int>(max_dim))
    throw InputError(d.description + ": features of " + std::to_string(std::max(dim, d.test.dim())) +
                     " dimensions; fednode's messages carry at most " + std::to_string(max_dim) +
                     " (reduce them, e.g. by PCA, before federating)");
  d.expansion = s.expansion;
  if (d.recipe.source == FeatureRecipe::Source::Backbone && d.recipe.preprocessing.output_dim == 0)
    d.recipe.preprocessing.output_dim = dim;
  if (d.expansion.enabled()) {
    d.fingerprint = expanded_fingerprint(d.fingerprint, d.expansion);
    d.description += ", expanded to " + std::to_string(d.expansion.dim) + " by a ReLU random projection (seed " +
                     std::to_string(d.expansion.seed) + ")";
  }
  return d;
}

LoadedData load_data(const Args& a, uint32_t max_dim, bool quiet, const std::atomic<bool>* stop) {
  return load_data(parse_data_settings(a), max_dim, quiet, stop);
}

PartitionOptions parse_partition_options(const Args& a, int nodes, uint64_t seed) {
  PartitionOptions p;
  p.nodes = nodes;
  p.seed = seed;
  p.scheme = parse_partition_scheme(a.str("partition", "iid"));
  // Each parameter belongs to one scheme; with another it would be ignored.
  for (const char* name : {"dirichlet-alpha", "min-samples"})
    if (a.has(name) && p.scheme != PartitionScheme::Dirichlet)
      throw UsageError("--" + std::string(name) + " is a parameter of --partition dirichlet");
  if (a.has("classes-per-node") && p.scheme != PartitionScheme::Shards && p.scheme != PartitionScheme::Dominant)
    throw UsageError("--classes-per-node is a parameter of --partition shards and dominant");
  if (a.has("uniform-share") && p.scheme != PartitionScheme::Dominant)
    throw UsageError("--uniform-share is a parameter of --partition dominant");
  p.uniform_share = a.real("uniform-share", p.uniform_share, 0.0, 1.0);
  p.dirichlet_alpha = a.real("dirichlet-alpha", p.dirichlet_alpha, 1e-6, 1e6);
  p.min_samples = static_cast<int>(a.integer("min-samples", p.min_samples, 0, 1LL << 40));
  p.classes_per_node = static_cast<int>(a.integer("classes-per-node", p.classes_per_node, 1, 1 << 20));
  return p;
}

}  // namespace fednode
