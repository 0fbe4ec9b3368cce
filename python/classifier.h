// The Python module's Classifier: fednode::Classifier (node/classifier.h) with a stop flag of its
// own, so that Ctrl-C ends a long classification, and shared so that a node's callback can hand it
// on.
#pragma once

#include "node/classifier.h"

#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <string>

namespace fednode::python {

class PyClassifier {
 public:
  static PyClassifier from_file(const std::string& path, const std::string& backbone, int input_size);
  static PyClassifier from_state_dir(const std::string& dir, bool personal, const std::string& backbone, int input_size);
  // A node's head with the node's card (contributors filled in).
  static PyClassifier from_head(const Head& head, const HeadCard& card);

  // `data`: a features matrix (rows as the node's data came, before any expansion) or a list of
  // image files.
  Classification classify(const pybind11::object& data) const;
  void export_to(const std::string& out, bool head_only) const;
  void save(const std::string& path) const;

  const Classifier& get() const { return *classifier_; }
  const Head& head() const { return classifier_->head(); }
  const HeadCard& card() const { return classifier_->card(); }

 private:
  PyClassifier(HeadFile file, ClassifierOptions options);
  static ClassifierOptions options(const std::string& backbone, int input_size);

  std::unique_ptr<std::atomic<bool>> stop_;
  std::shared_ptr<Classifier> classifier_;
};

}  // namespace fednode::python
