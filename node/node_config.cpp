#include "node/node_config.h"

#include "core/options.h"
#include "core/version.h"
#include "features/data_options.h"
#include "methods/method_options.h"
#include "methods/registry.h"
#include "core/limits.h"

#include <charconv>
#include <set>
#include <tuple>

namespace fednode {
namespace {

// [federation.data] and [federation.options] as the command line they stand for, so that they
// go through exactly the parser `fednode simulate` uses.
std::vector<std::string> as_arguments(const OptionMap& data, const OptionMap& options, const std::string& method) {
  std::vector<std::string> argv = {"--method", method};
  for (const auto* map : {&data, &options})
    for (const auto& [key, value] : *map) {
      if (method_flag_names().count(key)) {
        if (value == "true") argv.push_back("--" + key);
        else if (value != "false") throw UsageError("option '" + key + "' is a flag: give true or false, not '" + value + "'");
        continue;
      }
      argv.push_back("--" + key);
      argv.push_back(value);
    }
  return argv;
}

// Settings come from the file, so a bad one is the file's mistake, named with it.
template <class Parse>
auto from_file(const Topology& topology, NodeId id, Parse&& parse) {
  try {
    return parse();
  } catch (const UsageError& e) {
    throw InputError(topology.source + ", settings of " + topology.describe(id) + ": " + e.what());
  }
}

// Each table takes its own kind: a partition setting among a node's method options would give
// that node another partition than its peers'.
void check_option_tables(const Topology& topology, NodeId id, const OptionMap& data, const OptionMap& options) {
  std::set<std::string> data_names = data_option_names();
  data_names.insert(partition_option_names().begin(), partition_option_names().end());
  std::set<std::string> method_names = method_option_names();
  method_names.insert(method_flag_names().begin(), method_flag_names().end());
  for (const auto& [map, names, table] :
       {std::tuple{&data, &data_names, "data settings"}, {&options, &method_names, "method options"}})
    for (const auto& kv : *map)
      if (!names->count(kv.first))
        throw InputError(topology.source + ": unknown option '" + kv.first + "' among the " + table + " of " +
                         topology.describe(id) +
                         (data_names.count(kv.first) ? " (a data setting: it belongs in [federation.data] or [node.data])"
                          : method_names.count(kv.first) ? " (a method setting: it belongs in [federation.options] or [node.options])"
                                                        : ""));
}

// The node's data and method settings, parsed as one command line.
Args node_arguments(const Topology& topology, NodeId id, const OptionMap& data) {
  OptionMap options = topology.options_for(id);
  // A method's files, as its data's, are named relative to the topology file (docs/topologies.md).
  if (const MethodDescriptor* method = find_method(topology.federation.method))
    for (const std::string& key : method->path_options)
      if (auto it = options.find(key); it != options.end()) it->second = topology.resolve(it->second);
  std::set<std::string> valued = data_option_names();
  valued.insert(partition_option_names().begin(), partition_option_names().end());
  valued.insert(method_option_names().begin(), method_option_names().end());
  return from_file(topology, id, [&] {
    return Args(as_arguments(data, options, topology.federation.method), valued, method_flag_names());
  });
}

}  // namespace

NodeConfig node_config(const Topology& topology, const std::string& id_or_name, const NodeSetup& setup) {
  const NodeId id = topology.lookup(id_or_name).id;
  const auto say = [&](const std::string& line) {
    if (setup.progress) setup.progress(line);
  };
  OptionMap data = topology.data_for(id);
  check_option_tables(topology, id, data, topology.options_for(id));
  // Paths in a topology file are relative to the file (docs/topologies.md), not to where the
  // node happens to be started.
  for (const char* key : {"train-features", "train-labels", "test-features", "test-labels", "backbone"}) {
    auto it = data.find(key);
    if (it != data.end() && !(std::string(key) == "backbone" && it->second == "default"))
      it->second = topology.resolve(it->second);
  }
  if (!data.count("dataset") && !data.count("train-features"))
    throw InputError(topology.source + " gives " + topology.describe(id) +
                     " no data: set dataset = \"fashion-mnist\" or the four .npy files in [federation.data] "
                     "(fednode topology ... --data dataset=fashion-mnist)");
  const bool whole = data.count("partition") && data.at("partition") == "none";
  if (whole) data.erase("partition");
  const Args parsed = node_arguments(topology, id, data);

  NodeConfig config = node_config_without_data(topology, id_or_name);
  config.method = from_file(topology, id, [&] { return parse_method_options(parsed); });  // with the data's table
  say("loading data");
  LoadedData loaded =
      from_file(topology, id, [&] { return load_data(parsed, config.limits.max_dim, setup.quiet, setup.stop); });
  config.backbone_fingerprint = loaded.fingerprint;
  config.class_names = loaded.class_names;
  config.image_encoder = loaded.encoder;
  config.recipe = loaded.recipe;
  if (whole) {
    config.local = expand_features(std::move(loaded.train), loaded.expansion);
  } else {
    const PartitionOptions p = from_file(topology, id, [&] {
      return parse_partition_options(parsed, static_cast<int>(topology.nodes.size()), topology.federation.seed);
    });
    const Partition partition = make_partition(loaded.train.y, loaded.train.num_classes, p);
    const auto index = topology.partition_index(id);
    config.local = expand_features(loaded.train.subset(partition.at(static_cast<size_t>(index))), loaded.expansion);
  }
  config.test = expand_features(std::move(loaded.test), loaded.expansion);  // never empty (load_data)
  say("holds " + std::to_string(config.local.size()) + " samples");
  return config;
}

NodeConfig node_config_without_data(const Topology& topology, const std::string& id_or_name) {
  NodeConfig config;
  config.topology = topology;
  config.id = topology.lookup(id_or_name).id;
  config.method = method_options_for(topology, config.id);
  config.run_name = run_name(topology);
  config.limits = limits_of(topology);
  return config;
}

MethodOptions method_options_for(const Topology& topology, NodeId id) {
  check_option_tables(topology, id, {}, topology.options_for(id));
  const Args parsed = node_arguments(topology, id, {});
  return from_file(topology, id, [&] { return parse_method_options(parsed); });
}


void check_node_config(const NodeConfig& config, const NodePlan& plan) {
  const auto& topo = config.topology;
  if (config.run_name.empty()) throw InputError("the node needs a run name (its run id derives from it)");
  validate_topology(topo);  // load_topology did, but an application may build one in memory
  if (config.method.method != topo.federation.method)
    throw InputError("the node runs " + config.method.method + " but " + topo.source + " says " +
                     topo.federation.method);
  const std::string self = "node " + std::to_string(config.id);
  const auto bad = [&](const std::string& what) { throw InputError(self + "'s " + what); };
  if (config.retry_initial.count() <= 0) bad("retry_initial must be positive");
  if (config.resend_after < config.retry_initial) bad("resend_after must be at least retry_initial");
  if (config.receive_clearance.count() <= 0) bad("receive_clearance must be positive");
  if (config.ack_deadline_seconds &&
      !(*config.ack_deadline_seconds > 0 && *config.ack_deadline_seconds <= kMaxDeadlineSeconds))
    bad("ack_deadline_seconds must lie in (0, " + std::to_string(static_cast<int64_t>(kMaxDeadlineSeconds)) + "]");
  for (const auto& n : topo.nodes) {
    const auto peers = plan.peers();
    const bool concerned = n.id == config.id || std::count(peers.begin(), peers.end(), n.id) > 0;
    if (concerned && n.reachable && n.address.empty() && !config.discover)
      throw InputError(topo.describe(n.id) + " has no address in " + topo.source +
                       ": give it address = \"tcp://HOST:PORT\", or run with --discover to find it on the local network");
  }
  if (config.discover && !topo.node(config.id).reachable)
    throw InputError(self + " has reachable = false in " + topo.source + ": discovery's beacons announce a port " +
                     "to dial, and this node listens on none; give its peers' addresses in the file instead");
  if (config.discover && topo.hop_encryption() != HopEncryption::Curve)
    throw InputError("discovery needs CurveZMQ hops, and " + topo.source + " sets hop_encryption = \"none\": a " +
                     "beacon is only believed once the CurveZMQ handshake proves the peer's key");
  config.local.validate(self + "'s training features");
  if (config.local.size() == 0 && plan.wait_for.empty() && plan.late_from.empty())
    throw InputError(self + " has no training features and receives no knowledge in " + topo.source +
                     ": it would have nothing to send or to fit a head on");
  if (!config.test) return;
  config.test->validate(self + "'s test features");
  // Found out here rather than when the finished head is scored.
  if (config.test->dim() != config.local.dim() || config.test->num_classes != config.local.num_classes)
    throw InputError(self + "'s test features have " + std::to_string(config.test->dim()) + " dimensions and " +
                     std::to_string(config.test->num_classes) + " classes, its training features " +
                     std::to_string(config.local.dim()) + " and " + std::to_string(config.local.num_classes));
}

// [federation.limits] over the protocol's defaults. Every node of the federation reads the same
// table, so what a sender may send and what its receivers accept agree.
Limits limits_of(const Topology& topology) {
  Limits limits;
  const std::string where = topology.source + ":" + std::to_string(topology.federation.line_of("limits")) +
                            ": [federation.limits]";
  for (const auto& [name, text] : topology.federation.limits) {
    uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto parsed = std::from_chars(text.data(), end, value);
    if (text.empty() || parsed.ec != std::errc() || parsed.ptr != end)
      throw InputError(where + " " + name + " must be a whole number, got '" + text + "'");
    try {
      set_limit(limits, name, value);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
  }
  try {
    limits.validate();
  } catch (const InputError& e) {
    throw InputError(where + ": " + e.what());
  }
  return limits;
}

PeerKeys peer_keys(const Topology& topology) {
  PeerKeys keys;
  for (const auto& n : topology.nodes) {
    if (!n.public_key) throw InputError(topology.describe(n.id) + " has no public key");
    PublicKey key;
    key.bytes = *n.public_key;
    keys[n.id] = key;
  }
  return keys;
}

MemberInputs member_inputs(const NodeConfig& config, const NodePlan& plan, const Method& method, const SecretKey32& noise_key,
                           MemberMasks masks) {
  MemberInputs in;
  in.topology = &config.topology;
  in.plan = plan;
  in.method = &method;
  in.options = &config.method;
  in.local = &config.local;
  in.seed = config.topology.federation.seed;
  in.backbone_fingerprint = config.backbone_fingerprint;
  in.num_classes = config.local.num_classes;
  in.dim = static_cast<int>(config.local.dim());
  in.class_names = config.class_names;
  in.image_encoder = config.image_encoder;
  in.noise_key = noise_key;
  in.masks = std::move(masks);
  return in;
}

TransportOptions transport_options(const NodeConfig& config, std::shared_ptr<const CurveKeyPair> curve_keys) {
  TransportOptions t = config.transport;
  t.max_message_bytes = config.limits.max_message_bytes;
  t.silence_ms = static_cast<int>(config.topology.federation.silence_seconds * 1000);
  t.dial_only = !config.topology.node(config.id).reachable;
  t.curve = CurveSettings{};
  if (curve_keys) {
    t.curve.keys = std::move(curve_keys);
    t.curve.peers = peer_keys(config.topology);  // the whole topology: the ZAP allow list and the DEALERs' server keys
  }
  return t;
}

HeadCard head_card(const NodeConfig& config) {
  HeadCard card;
  card.method = config.method.method;
  card.run = config.run_name;
  card.node = config.topology.describe(config.id);
  if (static_cast<int>(config.class_names.size()) == config.local.num_classes) card.class_names = config.class_names;
  card.recipe = config.recipe;
  // An application that set its fingerprint (or features of another width) without a recipe:
  // its head reads features of that fingerprint, and nothing is known about images.
  if (card.recipe.fingerprint() != config.backbone_fingerprint ||
      (card.recipe.feature_dim() > 0 && card.recipe.feature_dim() != config.local.dim())) {
    card.recipe = FeatureRecipe{};
    card.recipe.backbone_fingerprint = config.backbone_fingerprint;
  }
  return card;
}

Hello hello_of(const NodeConfig& config) {
  Hello h;
  h.node = config.id;
  h.method = config.method.method;
  h.backbone_fingerprint = config.backbone_fingerprint;
  h.dim = static_cast<int>(config.local.dim());
  h.num_classes = config.local.num_classes;
  h.software = std::string("fednode ") + fednode_version();
  return h;
}

}  // namespace fednode
