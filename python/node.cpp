// fednode.Node: one node of a topology file, as `fednode run` makes it (node/node_config.h), or
// with features the Python program computed itself; stepped or run from Python, callbacks into
// Python on the thread that drives it.
#include "core/options.h"
#include "crypto/key_files.h"
#include "features/allocator.h"
#include "node/node.h"
#include "node/node_config.h"
#include "python/arrays.h"
#include "python/bindings.h"
#include "python/classifier.h"
#include "python/interrupt.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace fednode::python {
namespace {

// What the Python caller gives beyond the topology file (fednode/_node.py documents each).
struct NodeOptions {
  std::string key_dir, state_dir, metrics;
  bool discover = false;
  std::vector<std::string> discover_on;
  bool quiet = false;
  std::optional<RowsArray> train_X, test_X;
  std::optional<LabelsArray> train_y, test_y;
  std::string backbone_fingerprint;
  std::vector<std::string> class_names;
  int num_classes = 0;
  py::object on_head, on_log, on_knowledge;
};

// The node's config from the topology file alone, as `fednode run` makes it: its data loaded (and
// perhaps extracted through a backbone, which Ctrl-C ends).
NodeConfig config_from_file(const Topology& topology, const std::string& id, bool quiet, std::atomic<bool>& stop) {
  NodeSetup setup;
  setup.quiet = quiet;
  setup.stop = &stop;
  NodeConfig config = run_interruptibly<NodeConfig>(stop, [&] { return node_config(topology, id, setup); });
  release_freed_memory();  // what loading the data left on the heap (features/allocator.h)
  return config;
}

// The same with the features the program gives (copied: the node keeps them for its run).
NodeConfig config_from_arrays(const Topology& topology, const std::string& id, const NodeOptions& o) {
  NodeConfig config = node_config_without_data(topology, id);
  config.local = features_of(*o.train_X, *o.train_y, "features", o.num_classes);
  if (o.test_X) config.test = features_of(*o.test_X, *o.test_y, "test", o.num_classes);
  const int classes = std::max(config.local.num_classes, config.test ? config.test->num_classes : 0);
  config.local.num_classes = classes;
  if (config.test) config.test->num_classes = classes;
  if (!o.backbone_fingerprint.empty()) config.backbone_fingerprint = o.backbone_fingerprint;
  config.recipe.backbone_fingerprint = config.backbone_fingerprint;
  config.class_names = o.class_names;
  return config;
}

NodeConfig config_of(const Topology& topology, const std::string& id, const NodeOptions& o, std::atomic<bool>& stop) {
  if (o.train_X) return config_from_arrays(topology, id, o);
  if (!o.backbone_fingerprint.empty() || !o.class_names.empty() || o.test_X || o.num_classes)
    throw UsageError("backbone_fingerprint, class_names, num_classes and test go with features=(X, y)");
  return config_from_file(topology, id, o.quiet, stop);
}

class PyNode {
 public:
  PyNode(const std::string& topology_file, const std::string& id, NodeOptions o) {
    const Topology topology = load_topology(topology_file);
    NodeConfig config = config_of(topology, id, o, stop_);
    stop_ = false;
    config.state_dir = o.state_dir;
    config.metrics_path = o.metrics;
    config.discover = o.discover;
    config.discovery_interfaces = o.discover_on;
    if (!o.discover_on.empty() && !o.discover) throw UsageError("discover_on is for discover=True");
    const PythonCallback log(o.on_log), on_knowledge(o.on_knowledge), on_head(o.on_head);
    const bool quiet = o.quiet;
    config.callbacks.log = [log, quiet](LogLevel level, const std::string& line) {
      if (log && !quiet) log(to_string(level), line);
    };
    if (on_knowledge)
      config.callbacks.knowledge = [on_knowledge](NodeId from, const Knowledge& k) {
        on_knowledge(from, std::vector<NodeId>(k.contributors.begin(), k.contributors.end()));
      };
    card_ = head_card(config);
    if (on_head)
      config.callbacks.head = [this, on_head](const Head& head, const Contributors& who) {
        HeadCard card = card_;
        card.contributors = who;
        py::gil_scoped_acquire gil;
        on_head(py::cast(PyClassifier::from_head(head, card)));
      };
    topology_ = config.topology;
    run_name_ = config.run_name;
    const std::string key_dir = o.key_dir.empty() ? topology.key_dir_of(config.id) : o.key_dir;
    if (key_dir.empty()) throw InputError(topology.describe(config.id) + " has no key_dir; give key_dir=");
    Identity identity = load_identity(key_dir);
    py::gil_scoped_release release;
    node_ = std::make_unique<Node>(std::move(config), std::move(identity));
  }

  ~PyNode() {
    py::gil_scoped_release release;  // its callbacks may still take the GIL while it closes
    node_.reset();
  }

  bool step(double seconds) {
    const auto budget = std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, seconds) * 1000));
    py::gil_scoped_release release;
    return node_->step(budget);
  }

  std::string run() {
    return run_interruptibly<std::string>(stop_, [this] {
      while (!node_->step(std::chrono::milliseconds(200)))
        if (stop_) node_->request_stop();
      return result_json();
    });
  }

  std::string result_json() const { return fednode::result_json(node_->result(), topology_, run_name_); }
  void request_stop() { node_->request_stop(); }
  const std::string& state_dir() const { return node_->state_dir(); }

  std::optional<PyClassifier> classifier(bool personal) const {
    const NodeResult& r = node_->result();
    const std::shared_ptr<const Head>& head = personal ? r.personal_head : r.head;
    if (!head) return std::nullopt;
    HeadCard card = card_;
    card.contributors = r.contributors;
    card.personal = personal;
    return PyClassifier::from_head(*head, card);
  }

 private:
  std::atomic<bool> stop_{false};
  HeadCard card_;
  Topology topology_;
  std::string run_name_;
  std::unique_ptr<Node> node_;
};

}  // namespace

void bind_node(py::module_& m) {
  py::class_<PyNode>(m, "Node")
      .def(py::init([](const std::string& topology, const std::string& id, const std::string& key_dir,
                       const std::string& state_dir, const std::string& metrics, bool discover,
                       const std::vector<std::string>& discover_on, bool quiet, std::optional<RowsArray> train_X,
                       std::optional<LabelsArray> train_y, std::optional<RowsArray> test_X,
                       std::optional<LabelsArray> test_y, const std::string& backbone_fingerprint,
                       const std::vector<std::string>& class_names, int num_classes, py::object on_head,
                       py::object on_log, py::object on_knowledge) {
             NodeOptions o{key_dir,     state_dir,   metrics, discover, discover_on, quiet,  train_X,
                           test_X,      train_y,     test_y,  backbone_fingerprint,  class_names,
                           num_classes, on_head,     on_log,  on_knowledge};
             return std::make_unique<PyNode>(topology, id, std::move(o));
           }),
           py::arg("topology"), py::arg("id"), py::arg("key_dir"), py::arg("state_dir"), py::arg("metrics"),
           py::arg("discover"), py::arg("discover_on"), py::arg("quiet"), py::arg("train_X"), py::arg("train_y"),
           py::arg("test_X"), py::arg("test_y"), py::arg("backbone_fingerprint"), py::arg("class_names"),
           py::arg("num_classes"), py::arg("on_head"), py::arg("on_log"), py::arg("on_knowledge"))
      .def("step", &PyNode::step, py::arg("seconds"))
      .def("run", &PyNode::run)
      .def("result_json", &PyNode::result_json)
      .def("request_stop", &PyNode::request_stop)
      .def("classifier", &PyNode::classifier, py::arg("personal"))
      .def_property_readonly("state_dir", &PyNode::state_dir);
}

}  // namespace fednode::python
