// fednode::Classifier — what a federation learnt, ready to use: a node's head with the backbone and
// preprocessing its features came through (node/head_io.h's card), so that an application, `fednode
// predict` and `fednode export` classify new images exactly as the node's own data were read.
//
//   auto classifier = fednode::Classifier::from_state_dir("state/chain5/n4");
//   fednode::Classification c = classifier.classify_files({"photo.png"});
//   std::cout << classifier.card().class_name(c.labels[0]) << " " << c.probabilities(0, c.labels[0]);
//
// Every classify_* is const and safe to call from several threads at once; the backbone is loaded
// on the first images (features alone never load LibTorch for linear, LDA and adapter heads).
#pragma once

#include "features/feature_recipe.h"
#include "node/head_io.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace fednode {

struct ClassifierOptions {
  // A backbone file to use instead of the one the head recorded (moved, copied, or never recorded
  // for features from .npy files); its fingerprint must be the head's. With its sidecar, unless
  // the head recorded a preprocessing.
  std::string backbone;
  int input_size = 0;   // with `backbone` for a head that recorded none: the sidecar's size otherwise
  int threads = 0;      // the backbone's LibTorch threads; 0: one per core
  int batch_size = 64;  // images per backbone call
  bool progress = false;  // a progress line on stderr while images go through the backbone
  const std::atomic<bool>* stop = nullptr;  // ends a long classification with Interrupted
};

struct Classification {
  Labels labels;          // the most probable class of each row
  MatrixF logits;         // n x C, the head's scores
  MatrixF probabilities;  // n x C, softmax of the logits
};

class Classifier {
 public:
  // Throws InputError for a file read_head_file refuses.
  static Classifier from_file(const std::string& head_file, const ClassifierOptions& options = {});
  // A node's state directory: its head, or with `personal` its personal head (personalised FedCGS).
  static Classifier from_state_dir(const std::string& dir, bool personal = false, const ClassifierOptions& options = {});
  // Throws InputError when options.backbone gives other features than the head's.
  explicit Classifier(HeadFile file, const ClassifierOptions& options = {});
  ~Classifier();
  Classifier(Classifier&&) noexcept;
  Classifier& operator=(Classifier&&) noexcept;

  const Head& head() const;
  const HeadCard& card() const;
  int version() const;  // of the head file it came from
  // Whether classify_images can run: the recipe reads images (pixels, or a backbone).
  bool reads_images() const;

  // Rows of the features the node's data came as, before any expansion (what `fednode extract`
  // writes, or the pixels); the recipe's expansion is applied here.
  Classification classify_features(const MatrixF& X) const;
  // Images through the recipe: the backbone (loaded once) or the pixels, then the expansion.
  Classification classify_images(const ImageSource& images) const;
  Classification classify_files(const std::vector<std::string>& paths) const;
  // The head's input for `images`: what classify_images scores.
  MatrixF features_of(const ImageSource& images) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The head file of a node's state directory: DIR/head, or DIR/personal_head with `personal`.
// Throws InputError for a path that is not a directory or a directory without that head.
std::string state_dir_head_file(const std::string& dir, bool personal);

// Softmax of every row, in double precision, returned as float.
MatrixF softmax_rows(const MatrixF& logits);

}  // namespace fednode
