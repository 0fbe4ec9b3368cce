// fednode simulate: the whole federation in one process.
#include "core/log.h"
#include "core/options.h"
#include "cli/commands.h"
#include "cli/simulate_command.h"
#include "methods/method_options.h"
#include "methods/registry.h"
#include "cli/output_path.h"
#include "features/data_options.h"
#include "node/durable_file.h"
#include "core/limits.h"
#include "node/seed_sweep.h"
#include "node/head_io.h"
#include "node/simulator.h"
#include "topology/topology.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode simulate (--dataset fashion-mnist | --train-features X.npy --train-labels y.npy\n"
    "                         --test-features Xt.npy --test-labels yt.npy)\n"
    "       [--method METHOD] [--topology linear|ring|star|graph] [--nodes N]\n"
    "       [--partition iid|dirichlet|shards|labels|dominant] [--dirichlet-alpha A] [--min-samples M]\n"
    "       [--classes-per-node S] [--uniform-share F] [--seed S | --seeds LIST] [--report report.json]\n"
    "       [--no-baselines]\n"
    "       [--quiet]\n"
    "  --method, --topology, --nodes     fedpft, linear and 10 unless given\n"
    "  --partition                       iid unless given; dirichlet: label skew of concentration\n"
    "                                    --dirichlet-alpha (0.5), redrawn until every node holds\n"
    "                                    --min-samples (10); shards: --classes-per-node (2) classes\n"
    "                                    per node; labels: disjoint label sets; dominant: equal\n"
    "                                    sizes, --uniform-share (0.2) over every class, the rest over\n"
    "                                    --classes-per-node (2) dominant classes (FedCGS's pFL split)\n"
    "  --quiet                           no progress lines on stderr (the table is still printed)\n"
    "data:\n"
    "  --dataset fashion-mnist           Fashion-MNIST from the Debian package: raw pixels, or with\n"
    "  --backbone MODEL.pt               features of this TorchScript backbone ('default': the bundled\n"
    "                                    MobileNetV2), extracted through the feature cache\n"
    "  --input-size S --threads-extract T  backbone input size and LibTorch threads for extraction\n"
    "  --train-limit N --test-limit N    use the first N samples of each split\n"
    "  --num-classes C                   with .npy labels (default: largest label + 1)\n"
    "  --backbone-fingerprint F          names the .npy features' backbone in knowledge and report\n"
    "                                    (unnamed); nodes refuse knowledge of another fingerprint\n"
    "  --backbone MODEL.pt [--input-size S]  with .npy: the backbone they came from (`fednode extract`'s);\n"
    "                                    names them, and FGL's linear receiver reads images through it\n"
    "  --feature-expansion D             FedCGS's feature expansion: every node maps its features\n"
    "  --feature-expansion-seed S        to max(0, W f), W a D x d random projection from seed S (1)\n"
    "run:\n"
    "  --seed S                          draws the partition, initialisations, samples and heads (0)\n"
    "  --seeds LIST                      the same run once per seed (e.g. 1-5 or 1,4,9), then mean\n"
    "                                    and sd per node and of the gap to centralized.linear\n"
    "  --no-baselines                    skip the centralised and local-only heads (for timing)\n"
    "  --report FILE                     the JSON report (schema: docs/report.md)\n"
    "  --save-heads DIR                  every node's head as DIR/n<id>.head (and n<id>.personal_head),\n"
    "                                    head files for fednode predict and export\n";

constexpr size_t kMaxSeeds = 1000;

uint64_t parse_seed(const std::string& text, const std::string& list) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || text[0] == '+' || *end != '\0' || errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
    throw UsageError("--seeds: '" + text + "' in '" + list + "' is not a seed (an integer in [0, 2^63-1])");
  return v;
}

// "1-5", "1,4,9" or both ("1-3,7"): distinct seeds, in the order given.
std::vector<uint64_t> parse_seed_list(const std::string& list) {
  std::vector<uint64_t> seeds;
  std::set<uint64_t> seen;
  auto add = [&](uint64_t s) {
    if (!seen.insert(s).second)
      throw UsageError("--seeds: seed " + std::to_string(s) + " appears twice in '" + list + "'");
    if (seeds.size() == kMaxSeeds)
      throw UsageError("--seeds: more than " + std::to_string(kMaxSeeds) + " seeds in '" + list + "'");
    seeds.push_back(s);
  };
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dash = item.find('-', 1);
    if (dash == std::string::npos) {
      add(parse_seed(item, list));
    } else {
      const uint64_t lo = parse_seed(item.substr(0, dash), list), hi = parse_seed(item.substr(dash + 1), list);
      if (hi < lo) throw UsageError("--seeds: range '" + item + "' runs backwards");
      if (hi - lo >= kMaxSeeds)
        throw UsageError("--seeds: more than " + std::to_string(kMaxSeeds) + " seeds in '" + list + "'");
      for (uint64_t s = lo; s <= hi; ++s) add(s);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return seeds;
}

// A file is replaced whole or not at all, so that an interrupted write leaves the previous report
// in place; /dev/stdout or a pipe is written to as it is.
void write_report_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::ostringstream out;
  write(out);
  if (!is_stream_output(path)) {
    write_file_durably(path, out.str());
    return;
  }
  std::ofstream stream(path);
  stream << out.str();
  stream.flush();
  if (!stream) throw InputError("failed writing report to '" + path + "'");
}

// --save-heads DIR: every node's head (and personal head) as DIR/n<id>.head, with its card.
std::function<void(NodeId, const Head&, const Head*, const Contributors&)> head_saver(const std::string& heads_dir,
                                                                                       const SimulationOptions& o,
                                                                                       const LoadedData& data) {
  HeadCard card;
  card.method = o.method.method;
  card.run = "simulate seed " + std::to_string(o.seed);
  card.recipe = data.recipe;
  const int classes = std::max(data.train_rows().num_classes, data.test.num_classes);
  if (static_cast<int>(data.class_names.size()) == classes) card.class_names = data.class_names;
  return [heads_dir, card](NodeId id, const Head& head, const Head* personal, const Contributors& contributors) {
    HeadCard c = card;
    c.node = "node " + std::to_string(id);
    c.contributors = contributors;
    const std::string stem = (std::filesystem::path(heads_dir) / ("n" + std::to_string(id))).string();
    save_head_file(head, c, stem + ".head");
    if (!personal) return;
    c.personal = true;
    save_head_file(*personal, c, stem + ".personal_head");
  };
}

}  // namespace

std::set<std::string> simulate_valued_options() {
  std::set<std::string> v = {"topology", "nodes", "seed", "seeds", "report", "save-heads"};
  v.insert(data_option_names().begin(), data_option_names().end());
  v.insert(partition_option_names().begin(), partition_option_names().end());
  v.insert(method_option_names().begin(), method_option_names().end());
  return v;
}

std::set<std::string> simulate_flag_options() {
  std::set<std::string> f = {"no-baselines", "quiet"};
  f.insert(method_flag_names().begin(), method_flag_names().end());
  return f;
}

std::string simulate_command(const std::vector<std::string>& argv, const SimulateHooks& hooks) {
  const Args a(argv, simulate_valued_options(), simulate_flag_options());
  SimulationOptions o;
  // Every choice comes from the command line, so a bad one is a usage error (exit 2).
  const auto option = [](const char* name, auto&& parse) {
    try {
      return parse();
    } catch (const InputError& e) {
      throw UsageError(std::string(name) + ": " + e.what());
    }
  };
  o.method = option("method options", [&] { return parse_method_options(a); });
  o.topology = option("--topology", [&] { return parse_topology_mode(a.str("topology", "linear")); });
  const bool sweep = a.has("seeds");
  if (sweep && a.has("seed")) throw UsageError("--seed and --seeds exclude each other");
  const std::vector<uint64_t> seeds = sweep ? parse_seed_list(a.required("seeds")) : std::vector<uint64_t>{};
  // The range `fednode topology --seed` takes, so that any networked run can be simulated.
  o.seed = static_cast<uint64_t>(a.integer("seed", 0, 0, INT64_MAX));
  const int nodes = static_cast<int>(a.integer("nodes", 10, 1, static_cast<int64_t>(kMaxTopologyNodes)));
  if ((o.topology == TopologyMode::Ring || o.topology == TopologyMode::Star) && nodes < 2)
    throw UsageError("--nodes: a " + std::string(to_string(o.topology)) + " needs at least 2 nodes, got " +
                     std::to_string(nodes));
  o.partition = option("partition options", [&] { return parse_partition_options(a, nodes, o.seed); });
  o.baselines = !a.flag("no-baselines");
  const bool quiet = a.flag("quiet") || log_level_from_environment() < LogLevel::Info;
  if (!quiet) o.progress = hooks.progress;
  o.stop = hooks.stop;

  if (a.has("report")) check_output_path("--report", a.required("report"));
  const std::string heads_dir = a.str("save-heads", "");
  if (!heads_dir.empty()) {
    if (sweep) throw UsageError("--save-heads keeps one run's heads; give --seed, not --seeds");
    std::error_code ec;
    std::filesystem::create_directories(heads_dir, ec);
    if (ec || !std::filesystem::is_directory(heads_dir))
      throw InputError("--save-heads " + heads_dir + ": cannot create the folder" + (ec ? ": " + ec.message() : ""));
  }

  DataSettings settings = parse_data_settings(a, !hooks.lent);
  if (hooks.lent) {
    for (const char* file : {"dataset", "train-features", "train-labels", "test-features", "test-labels"})
      if (a.has(file)) throw UsageError("--" + std::string(file) + " and data given as arrays exclude each other");
    settings.lent = *hooks.lent;
  }
  LoadedData data = load_data(settings, Limits{}.max_dim, quiet, hooks.stop);
  o.backbone_fingerprint = data.fingerprint;
  o.class_names = data.class_names;
  o.image_encoder = data.encoder;
  o.dataset_description = data.description;
  if (!heads_dir.empty()) o.on_head = head_saver(heads_dir, o, data);

  // Expanded features are new rows the run owns; otherwise the rows are read where they lie.
  const Features expanded = data.expansion.enabled() ? expand_rows(data.train_rows(), data.expansion) : Features{};
  const FeatureRows train = data.expansion.enabled() ? expanded.rows() : data.train_rows();
  const Features test = expand_features(std::move(data.test), data.expansion);
  std::ostringstream json;
  if (sweep) {
    const SeedSweepReport report = simulate_seeds(train, test, o, seeds);
    write_seed_sweep_json(report, json);
    if (hooks.table) print_seed_sweep_table(report, *hooks.table);
  } else {
    const SimulationReport report = simulate(train, test, o);
    write_report_json(report, json);
    if (hooks.table) print_report_table(report, *hooks.table);
  }
  if (a.has("report")) write_report_file(a.required("report"), [&](std::ostream& out) { out << json.str(); });
  return json.str();
}

int cmd_simulate(const std::vector<std::string>& argv) {
  if (Args(argv, simulate_valued_options(), simulate_flag_options()).help()) {
    // The methods from the registry, so that a new method is listed without an edit here.
    std::cout << kHelp << "  METHOD                            " << method_names() << "\n" << method_options_help();
    return 0;
  }
  SimulateHooks hooks;
  hooks.progress = [](const std::string& m) { std::cerr << "[simulate] " << m << std::endl; };
  hooks.table = &std::cout;
  simulate_command(argv, hooks);
  return 0;
}

}  // namespace fednode::cli
