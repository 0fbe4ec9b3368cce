// fednode simulate: the whole federation in one process.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/method_options.h"
#include "features/extract.h"
#include "features/idx.h"
#include "features/npy.h"
#include "features/partition.h"
#include "node/simulator.h"

#include <fstream>
#include <iostream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode simulate (--dataset fashion-mnist | --train-features X.npy --train-labels y.npy\n"
    "                         --test-features Xt.npy --test-labels yt.npy)\n"
    "       --method fedpft|fedcgs|fedtc --topology linear|ring|star --nodes N\n"
    "       --partition iid|dirichlet|shards|labels [--dirichlet-alpha A] [--min-samples M]\n"
    "       [--classes-per-node S] [--seed S] [--report report.json] [--no-baselines] [--quiet]\n"
    "  --quiet                           no progress lines on stderr (the table is still printed)\n"
    "data:\n"
    "  --dataset fashion-mnist           Fashion-MNIST from the Debian package: raw pixels, or with\n"
    "  --backbone MODEL.pt               features of this TorchScript backbone ('default': the bundled\n"
    "                                    MobileNetV2), extracted through the feature cache\n"
    "  --input-size S --threads-extract T  backbone input size and LibTorch threads for extraction\n"
    "  --train-limit N --test-limit N    use the first N samples of each split\n"
    "  --num-classes C                   with .npy labels (default: largest label + 1)\n"
    "  --backbone-fingerprint F          names the features' backbone in knowledge and report\n"
    "run:\n"
    "  --no-baselines                    skip the centralised and local-only heads (for timing)\n"
    "  --report FILE                     the JSON report (schema: docs/report.md)\n";

std::set<std::string> valued_options() {
  std::set<std::string> v = {"dataset",    "train-features", "train-labels",   "test-features",
                             "test-labels", "train-limit",   "test-limit",     "num-classes",
                             "topology",   "nodes",          "partition",      "dirichlet-alpha",
                             "min-samples", "classes-per-node", "seed",        "report",
                             "backbone-fingerprint", "backbone", "input-size", "threads-extract"};
  v.insert(method_option_names().begin(), method_option_names().end());
  return v;
}

std::set<std::string> flag_options() {
  std::set<std::string> f = {"no-baselines", "quiet"};
  f.insert(method_flag_names().begin(), method_flag_names().end());
  return f;
}

}  // namespace

int cmd_simulate(const std::vector<std::string>& argv) {
  const Args a(argv, valued_options(), flag_options());
  if (a.help()) {
    std::cout << kHelp << method_options_help();
    return 0;
  }
  SimulationOptions o;
  o.method = parse_method_options(a);
  o.topology = parse_sim_topology(a.str("topology", "linear"));
  o.partition.nodes = static_cast<int>(a.integer("nodes", 10, 1, 100000));
  o.partition.scheme = parse_partition_scheme(a.str("partition", "iid"));
  o.partition.dirichlet_alpha = a.real("dirichlet-alpha", o.partition.dirichlet_alpha, 1e-6, 1e6);
  o.partition.min_samples = static_cast<int>(a.integer("min-samples", o.partition.min_samples, 0, 1LL << 40));
  o.partition.classes_per_node = static_cast<int>(a.integer("classes-per-node", o.partition.classes_per_node, 1, 1 << 20));
  o.seed = static_cast<uint64_t>(a.integer("seed", 0, 0, (1LL << 62)));
  o.partition.seed = o.seed;
  o.baselines = !a.flag("no-baselines");
  o.backbone_fingerprint = a.str("backbone-fingerprint", "pixels");
  const bool quiet = a.flag("quiet");
  if (!quiet) o.progress = [](const std::string& m) { std::cerr << "[simulate] " << m << std::endl; };

  Features train, test;
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
      const Extracted tr = extract_features(x);
      x.split = "test";
      x.limit = test_limit;
      const Extracted te = extract_features(x);
      train = tr.features;
      test = te.features;
      o.backbone_fingerprint = tr.fingerprint;
      o.dataset_description = "fashion-mnist through backbone " + tr.fingerprint.substr(0, 12) + " (" +
                              std::to_string(train.size()) + " train, " + std::to_string(test.size()) +
                              " test)";
    } else {
      train = load_fashion_mnist(default_fashion_mnist_dir(), "train", train_limit);
      test = load_fashion_mnist(default_fashion_mnist_dir(), "test", test_limit);
      o.dataset_description = "fashion-mnist pixels (" + std::to_string(train.size()) + " train, " +
                              std::to_string(test.size()) + " test)";
    }
  } else {
    if (a.has("backbone"))
      throw UsageError("--backbone extracts from --dataset; .npy inputs are features already");
    const int classes = static_cast<int>(a.integer("num-classes", 0, 0, 1 << 20));
    train = load_npy_dataset(a.required("train-features"), a.required("train-labels"), classes);
    test = load_npy_dataset(a.required("test-features"), a.required("test-labels"), classes);
    const int C = std::max(train.num_classes, test.num_classes);
    train.num_classes = test.num_classes = C;
    train = train.first(train_limit);
    test = test.first(test_limit);
    o.dataset_description = a.required("train-features");
  }

  const SimulationReport report = simulate(train, test, o);
  if (a.has("report")) {
    const std::string path = a.required("report");
    std::ofstream out(path);
    if (!out) throw InputError("cannot open report file '" + path + "' for writing");
    write_report_json(report, out);
    if (!out) throw InputError("failed writing report file '" + path + "'");
  }
  print_report_table(report, std::cout);
  return 0;
}

}  // namespace fednode::cli
