// fednode simulate: the whole federation in one process.
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/method_options.h"
#include "cli/data_options.h"
#include "node/simulator.h"

#include <fstream>
#include <iostream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode simulate (--dataset fashion-mnist | --train-features X.npy --train-labels y.npy\n"
    "                         --test-features Xt.npy --test-labels yt.npy)\n"
    "       --method fedpft|fedcgs|fedtc --topology linear|ring|star|graph --nodes N\n"
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
    "  --feature-expansion D             FedCGS's feature expansion: every node maps its features\n"
    "  --feature-expansion-seed S        to max(0, W f), W a D x d random projection from seed S (1)\n"
    "run:\n"
    "  --no-baselines                    skip the centralised and local-only heads (for timing)\n"
    "  --report FILE                     the JSON report (schema: docs/report.md)\n";

std::set<std::string> valued_options() {
  std::set<std::string> v = {"topology", "nodes", "seed", "report"};
  v.insert(data_option_names().begin(), data_option_names().end());
  v.insert(partition_option_names().begin(), partition_option_names().end());
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
  o.topology = parse_topology_mode(a.str("topology", "linear"));
  o.seed = static_cast<uint64_t>(a.integer("seed", 0, 0, (1LL << 62)));
  o.partition = parse_partition_options(a, static_cast<int>(a.integer("nodes", 10, 1, 100000)), o.seed);
  o.baselines = !a.flag("no-baselines");
  const bool quiet = a.flag("quiet");
  if (!quiet) o.progress = [](const std::string& m) { std::cerr << "[simulate] " << m << std::endl; };

  LoadedData data = load_data(a, quiet);
  o.backbone_fingerprint = data.fingerprint;
  o.dataset_description = data.description;

  const SimulationReport report =
      simulate(expand_features(std::move(data.train), data.expansion),
               expand_features(std::move(data.test), data.expansion), o);
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
