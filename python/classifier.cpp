// fednode.Classifier: what a federation learnt, ready to use (node/classifier.h) -- a head with the
// recipe its features came through. Features or image files in, labels and probabilities out;
// export as `fednode export` does.
#include "python/classifier.h"

#include "core/options.h"
#include "node/classifier_export.h"
#include "python/arrays.h"
#include "python/bindings.h"
#include "python/interrupt.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace fednode::python {

PyClassifier::PyClassifier(HeadFile file, ClassifierOptions options) : stop_(std::make_unique<std::atomic<bool>>(false)) {
  options.stop = stop_.get();
  classifier_ = std::make_shared<Classifier>(std::move(file), options);
}

PyClassifier PyClassifier::from_file(const std::string& path, const std::string& backbone, int input_size) {
  return PyClassifier(read_head_file(path), options(backbone, input_size));
}

PyClassifier PyClassifier::from_state_dir(const std::string& dir, bool personal, const std::string& backbone,
                                          int input_size) {
  return from_file(state_dir_head_file(dir, personal), backbone, input_size);
}

PyClassifier PyClassifier::from_head(const Head& head, const HeadCard& card) {
  // A copy the classifier owns, through the head file's bytes: the node keeps its own.
  return PyClassifier(parse_head_file(head_file_bytes(head, card), "the node's head"), {});
}

ClassifierOptions PyClassifier::options(const std::string& backbone, int input_size) {
  ClassifierOptions o;
  o.backbone = backbone;
  o.input_size = input_size;
  if (input_size != 0 && backbone.empty()) throw UsageError("input_size goes with backbone");
  return o;
}

Classification PyClassifier::classify(const py::object& data) const {
  *stop_ = false;
  if (py::isinstance<py::str>(data)) throw InputError("give a list of image files, or a features matrix, not one string");
  if (py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data)) {
    std::vector<std::string> files;
    for (const py::handle item : data) files.push_back(py::str(py::module_::import("os").attr("fspath")(item)));
    return run_interruptibly<Classification>(*stop_, [&] { return classifier_->classify_files(files); });
  }
  const MatrixF X = matrix_of(data.cast<RowsArray>(), "features");
  return run_interruptibly<Classification>(*stop_, [&] { return classifier_->classify_features(X); });
}

void PyClassifier::export_to(const std::string& out, bool head_only) const {
  py::gil_scoped_release release;
  export_classifier(*classifier_, out, head_only);
}

void PyClassifier::save(const std::string& path) const { save_head_file(head(), card(), path); }

void bind_classifier(py::module_& m) {
  py::class_<PyClassifier>(m, "Classifier",
                           "What a federation learnt, ready to use: a node's head with the recipe its features came\n"
                           "through (backbone, preprocessing, expansion), as fednode predict and export use it.")
      .def_static("from_file", &PyClassifier::from_file, py::arg("path"), py::arg("backbone") = "",
                  py::arg("input_size") = 0,
                  "A head file (simulate's save_heads, a node's state directory's head). backbone: a model file\n"
                  "to read images with instead of the recorded one (its fingerprint must be the head's).")
      .def_static("from_state_dir", &PyClassifier::from_state_dir, py::arg("dir"), py::arg("personal") = false,
                  py::arg("backbone") = "", py::arg("input_size") = 0,
                  "A node's state directory: its head, or with personal=True its personal head.")
      .def("predict", [](const PyClassifier& c, const py::object& data) { return to_numpy(c.classify(data).labels); },
           py::arg("data"),
           "Labels (int32) for `data`: a features matrix, rows as the node's data came (before any\n"
           "expansion), or a list of image files read through the recorded backbone. Ctrl-C stops it.")
      .def("predict_proba",
           [](const PyClassifier& c, const py::object& data) { return to_numpy(c.classify(data).probabilities); },
           py::arg("data"), "Class probabilities [n, classes] (softmax of the logits) for `data`, as predict reads it.")
      .def("logits", [](const PyClassifier& c, const py::object& data) { return to_numpy(c.classify(data).logits); },
           py::arg("data"), "The head's scores [n, classes] for `data`, as an export gives them.")
      .def("export", &PyClassifier::export_to, py::arg("out"), py::arg("head_only") = false,
           "One TorchScript module (and OUT.json describing it) as fednode export writes: forward(images)\n"
           "to logits, or with head_only=True forward(features).")
      .def("save", &PyClassifier::save, py::arg("path"), "The head and its card as a head file.")
      .def_property_readonly("kind", [](const PyClassifier& c) { return c.head().kind(); })
      .def_property_readonly("num_classes", [](const PyClassifier& c) { return c.head().num_classes(); })
      .def_property_readonly("dim", [](const PyClassifier& c) { return c.head().dim(); })
      .def_property_readonly("reads_images", [](const PyClassifier& c) { return c.get().reads_images(); })
      .def_property_readonly("class_names", [](const PyClassifier& c) { return c.card().class_names; })
      .def_property_readonly("method", [](const PyClassifier& c) { return c.card().method; })
      .def_property_readonly("node", [](const PyClassifier& c) { return c.card().node; })
      .def_property_readonly("run", [](const PyClassifier& c) { return c.card().run; })
      .def_property_readonly("personal", [](const PyClassifier& c) { return c.card().personal; })
      .def_property_readonly("recipe", [](const PyClassifier& c) { return c.card().recipe.describe(); })
      .def_property_readonly("contributors", [](const PyClassifier& c) {
        const Contributors& who = c.card().contributors;
        return std::vector<NodeId>(who.begin(), who.end());
      });
}

}  // namespace fednode::python
