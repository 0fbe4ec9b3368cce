// The whole federation in one process: N nodes over a linear, ring, star or graph topology, each
// following its plan with node/phases.h exactly as a networked node does, with messages handed
// over in memory.
#pragma once

#include "features/partition.h"
#include "methods/fedcgs/personalize.h"
#include "methods/method.h"
#include "methods/registry.h"
#include "node/privacy_ledger.h"
#include "topology/topology.h"

#include <atomic>
#include <functional>
#include <optional>
#include <iosfwd>
#include <string>
#include <vector>

namespace fednode {

// The same modes as topology files. Star: node 0 is the hub; ring: starts at node 0; graph: the
// builder's graph (topology/builders.h: the diamond for 4 nodes, else a seeded random DAG).
using SimTopology = TopologyMode;

struct SimulationOptions {
  MethodOptions method;
  SimTopology topology = SimTopology::Linear;
  PartitionOptions partition;  // partition.nodes is the number of nodes
  uint64_t seed = 0;
  bool baselines = true;       // centralised and local-only heads
  std::string backbone_fingerprint = "pixels";
  std::vector<std::string> class_names;  // label i's name, where the data names its classes
  std::shared_ptr<const ImageEncoder> image_encoder;  // images to the data's features (NodeContext)
  std::string dataset_description;  // for the report
  std::function<void(const std::string&)> progress;  // may be empty
  // When set and true, the run ends at its next class or epoch by throwing Interrupted (a Python
  // caller's Ctrl-C). May be null.
  const std::atomic<bool>* stop = nullptr;
  // Every piece of knowledge a node accepts, as it arrives (to, from): everything that node learns
  // from others (tests record what a hub sees under secure aggregation). May be empty.
  std::function<void(NodeId to, NodeId from, const Knowledge&)> on_knowledge;
  // Every node's final head (and personal head, or null), once the federation has run: what
  // `simulate --save-heads` writes. May be empty.
  std::function<void(NodeId, const Head& head, const Head* personal, const Contributors&)> on_head;
};

struct SimNodeResult {
  NodeId id = 0;
  int64_t samples = 0;
  std::vector<int64_t> class_counts;
  std::vector<int> classes_held;
  Contributors contributors;          // whose data the node's head was trained on
  double accuracy = 0;
  std::vector<ClassAccuracy> per_class;
  double local_only_accuracy = -1;    // < 0: not computed
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  double seconds = 0;
  PrivacyLedger privacy;              // what it released of its own data (node/privacy_ledger.h)
  // With personalised FedCGS (FedCgsOptions::personalize), accuracies weighted by the node's class proportions: its
  // local-only head, its federation head, its personal head.
  struct Personalized {
    double local_only = -1, global = -1, personal = -1;
  } personalized;
};

struct SimulationReport {
  SimulationOptions options;
  int64_t train_samples = 0, test_samples = 0;
  int dim = 0, num_classes = 0;
  std::vector<SimNodeResult> nodes;
  bool has_baselines = false;
  double centralized_linear = -1, centralized_lda = -1;
  // The method's own baselines (MethodDescriptor::baselines), when it has any.
  std::vector<MethodBaseline> method_baselines, method_baseline_seconds;
  std::vector<int> absent_classes;    // classes no node holds
  double wall_seconds = 0;
};

// The training rows are read where they lie (a caller's NumPy array): each node's share is copied
// out of them, and the centralised baselines, when asked for, copy them whole while they train.
SimulationReport simulate(const FeatureRows& train, const Features& test, const SimulationOptions& options);
SimulationReport simulate(const Features& train, const Features& test, const SimulationOptions& options);

class JsonWriter;

// The JSON report (schema in docs/report.md).
void write_report_json(const SimulationReport& report, std::ostream& out);
// The same object, written where `w` stands (inside a larger document).
void write_report(JsonWriter& w, const SimulationReport& report);
// A short table for humans.
void print_report_table(const SimulationReport& report, std::ostream& out);

}  // namespace fednode
