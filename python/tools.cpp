// The module's small tools, each the call its command makes: keygen (`fednode keygen`), topology
// files (`fednode topology`'s reading), extraction (`fednode extract`) into NumPy arrays.
#include "core/options.h"
#include "crypto/key_files.h"
#include "features/extract.h"
#include "python/arrays.h"
#include "python/bindings.h"
#include "python/interrupt.h"
#include "topology/topology.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace fednode::python {
namespace {

// Hex, as `fednode keygen` prints it; None without a key.
py::object key_text(const std::optional<PublicKeyBytes>& key) {
  if (!key) return py::none();
  std::string hex;
  for (const uint8_t b : *key) hex += "0123456789abcdef"[b >> 4], hex += "0123456789abcdef"[b & 15];
  return py::str(hex);
}

py::dict node_dict(const Topology& t, const TopologyNode& n) {
  py::dict d;
  d["id"] = n.id;
  d["name"] = n.name;
  d["address"] = n.address;
  d["bind"] = n.bind;
  d["reachable"] = n.reachable;  // false: behind NAT, it dials out (docs/deployment.md)
  d["public_key"] = key_text(n.public_key);
  d["key_dir"] = t.key_dir_of(n.id);
  d["state_dir"] = t.state_dir_of(n.id);
  d["partition_index"] = t.partition_index(n.id);
  d["options"] = t.options_for(n.id);
  d["data"] = t.data_for(n.id);
  return d;
}

// The file as read and validated (load_topology), its paths resolved as a node would use them.
py::dict topology_dict(const std::string& path) {
  const Topology t = load_topology(path);
  const FederationSettings& f = t.federation;
  py::dict d;
  d["source"] = t.source;
  d["mode"] = to_string(f.mode);
  d["method"] = f.method;
  d["run"] = run_name(t);
  d["seed"] = f.seed;
  d["hub"] = f.hub ? py::object(py::int_(*f.hub)) : py::none();
  d["hop_encryption"] = to_string(t.hop_encryption());
  d["deadline_seconds"] = f.deadline_seconds;
  d["ack_deadline_seconds"] = f.ack_deadline_seconds;
  py::list nodes, edges, relays;
  for (const TopologyNode& n : t.nodes) nodes.append(node_dict(t, n));
  for (const TopologyEdge& e : t.edges) edges.append(py::make_tuple(e.from, e.to, e.feedback));
  for (const TopologyRelay& r : t.relays) {
    py::dict relay;
    relay["name"] = r.name;
    relay["address"] = r.address;
    relay["bind"] = r.bind.empty() ? r.address : r.bind;
    relay["public_key"] = key_text(r.public_key);
    relay["key_dir"] = r.key_dir.empty() ? "" : t.resolve(r.key_dir);
    relays.append(relay);
  }
  d["nodes"] = nodes;
  d["edges"] = edges;
  d["relays"] = relays;
  return d;
}

// The features as a NumPy array that owns them: no copy out of the extraction's matrix.
py::array_t<float> adopt(MatrixF&& X) {
  auto* owned = new MatrixF(std::move(X));
  py::capsule free(owned, [](void* p) { delete static_cast<MatrixF*>(p); });
  return py::array_t<float>({static_cast<py::ssize_t>(owned->rows()), static_cast<py::ssize_t>(owned->cols())},
                            owned->data(), free);
}

py::tuple extract(ExtractOptions o) {
  std::atomic<bool> stop{false};
  o.stop = &stop;
  Extracted ex = run_interruptibly<Extracted>(stop, [&] { return extract_features(o); });
  py::dict info;
  info["class_names"] = ex.class_names;
  info["fingerprint"] = ex.fingerprint;
  info["description"] = ex.description;
  py::list skipped;
  for (const SkippedImage& s : ex.skipped) skipped.append(py::make_tuple(s.file, s.reason));
  info["skipped"] = skipped;
  info["ignored"] = ex.ignored;
  Labels y = std::move(ex.features.y);
  return py::make_tuple(adopt(std::move(ex.features.X)), to_numpy(y), info);
}

}  // namespace

void bind_tools(py::module_& m) {
  m.def("keygen", [](const std::string& dir) {
    if (dir.empty()) throw UsageError("keygen needs a directory, got an empty path");
    return write_new_identity(dir).to_hex();
  }, py::arg("dir"));
  m.def("load_topology", &topology_dict, py::arg("path"));
  m.def("extract",
        [](const std::string& dataset, const std::string& images, const std::string& split, int64_t limit,
           const std::string& backbone, int input_size, int threads, int batch_size, bool cache, bool progress,
           bool skip_bad, const std::string& dataset_dir, const std::string& cache_dir, bool optimize) {
          if (dataset.empty() == images.empty()) throw UsageError("extract needs dataset=\"fashion-mnist\" or images=DIR");
          ExtractOptions o;
          o.dataset = dataset;
          o.images_dir = images;
          o.split = split;
          o.limit = limit;
          o.backbone = backbone == "default" ? "" : backbone;
          o.input_size = input_size;
          o.threads = threads;
          o.batch_size = batch_size;
          o.use_cache = cache;
          o.progress = progress;
          o.skip_bad = skip_bad;
          o.dataset_dir = dataset_dir;
          o.cache_dir = cache_dir;
          o.optimize = optimize;
          return extract(o);
        },
        py::arg("dataset"), py::arg("images"), py::arg("split"), py::arg("limit"), py::arg("backbone"),
        py::arg("input_size"), py::arg("threads"), py::arg("batch_size"), py::arg("cache"), py::arg("progress"),
        py::arg("skip_bad"), py::arg("dataset_dir"), py::arg("cache_dir"), py::arg("optimize"));
}

}  // namespace fednode::python
