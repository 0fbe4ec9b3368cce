#include "node/prediction.h"

#include "features/image_sources.h"
#include "features/npy.h"

#include <algorithm>

namespace fednode {
namespace {

// A class folder's label: the head's class of that name, else its number.
int32_t label_of_folder(const std::string& folder, const HeadCard& card, int classes, const std::string& root) {
  for (int c = 0; c < classes; ++c)
    if (card.class_name(c) == folder) return c;
  if (!folder.empty() && folder.size() < 10 && folder.find_first_not_of("0123456789") == std::string::npos) {
    const int c = std::stoi(folder);
    if (c < classes) return c;
  }
  std::string known;
  for (int c = 0; c < classes && c < 20; ++c) known += (c ? ", " : "") + card.class_name(c);
  if (classes > 20) known += ", ...";
  throw InputError(root + "/" + folder + ": names no class of the head (its classes: " + known +
                   "); name class folders after them, by name or number, or put the images in one folder unlabelled");
}

}  // namespace

Predictions predict_image_folder(const Classifier& classifier, const std::string& dir, bool skip_bad) {
  const ImageFolder folder = scan_images_to_classify(dir);
  const int classes = classifier.head().num_classes();
  std::vector<int32_t> label_of(folder.class_names.size());
  for (size_t c = 0; c < folder.class_names.size(); ++c)
    label_of[c] = label_of_folder(folder.class_names[c], classifier.card(), classes, dir);

  Predictions p;
  p.description = "image folder " + dir + ", " + std::to_string(folder.files.size()) + " images" +
                  (folder.class_names.empty() ? " (unlabelled)" : " in " + std::to_string(folder.class_names.size()) + " class folders");
  const FolderSource source(folder, skip_bad, classifier.card().recipe.preprocessing.channels);
  Classification all;
  try {
    all = classifier.classify_images(source);
  } catch (const InputError& e) {
    if (skip_bad) throw;
    throw InputError(std::string(e.what()) + " (--skip-bad leaves such files out, naming each)");
  }
  // Rows of files that did not decode are left out, as extract leaves them out.
  const auto& bad = source.bad();
  const int64_t n = static_cast<int64_t>(folder.files.size());
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < n; ++i) {
    if (bad.count(i)) {
      p.skipped.push_back(bad.at(i));
      continue;
    }
    kept.push_back(i);
    p.items.push_back(folder.files[static_cast<size_t>(i)]);
    if (!folder.labels.empty()) p.truth.push_back(label_of[static_cast<size_t>(folder.labels[static_cast<size_t>(i)])]);
  }
  if (kept.empty()) throw InputError(dir + ": none of its " + std::to_string(n) + " images could be decoded");
  Classification& c = p.classification;
  c.logits.resize(static_cast<Eigen::Index>(kept.size()), all.logits.cols());
  c.probabilities.resize(c.logits.rows(), c.logits.cols());
  for (size_t r = 0; r < kept.size(); ++r) {
    c.logits.row(static_cast<Eigen::Index>(r)) = all.logits.row(kept[r]);
    c.probabilities.row(static_cast<Eigen::Index>(r)) = all.probabilities.row(kept[r]);
    c.labels.push_back(all.labels[static_cast<size_t>(kept[r])]);
  }
  return p;
}

Predictions predict_fashion_mnist(const Classifier& classifier, const std::string& split, int64_t limit, const std::string& dir) {
  if (split != "train" && split != "test") throw InputError("Fashion-MNIST split '" + split + "' (expected train or test)");
  const std::string root = dir.empty() ? default_fashion_mnist_dir() : dir;
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::string images_path = find_idx_file(root, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_idx_file(root, prefix + "-labels-idx1-ubyte");
  IdxImages images = read_idx_images(images_path, limit);
  const std::vector<uint8_t> labels = read_idx_labels(labels_path, limit);
  if (static_cast<int64_t>(labels.size()) != images.count)
    throw InputError("Fashion-MNIST: " + images_path + " holds " + std::to_string(images.count) + " images but " +
                     labels_path + " holds " + std::to_string(labels.size()) + " labels");
  Predictions p;
  p.description = "fashion-mnist " + split + ", " + std::to_string(images.count) + " images";
  for (int64_t i = 0; i < images.count; ++i) p.items.push_back(split + " image " + std::to_string(i));
  p.truth.assign(labels.begin(), labels.end());
  p.classification = classifier.classify_images(IdxSource(std::move(images), split));
  return p;
}

Predictions predict_features(const Classifier& classifier, const std::string& features_npy, const std::string& labels_npy) {
  Predictions p;
  const MatrixF X = read_npy_features(features_npy);
  if (!labels_npy.empty()) {
    p.truth = read_npy_labels(labels_npy);
    if (static_cast<int64_t>(p.truth.size()) != X.rows())
      throw InputError(labels_npy + ": " + std::to_string(p.truth.size()) + " labels for the " + std::to_string(X.rows()) +
                       " rows of " + features_npy);
  }
  p.description = features_npy + ", " + std::to_string(X.rows()) + " rows";
  for (Eigen::Index i = 0; i < X.rows(); ++i) p.items.push_back("row " + std::to_string(i));
  p.classification = classifier.classify_features(X);
  return p;
}

Evaluation evaluate(const Predictions& p, int classes) {
  Evaluation e;
  e.per_class.assign(static_cast<size_t>(classes), {});
  e.confusion.assign(static_cast<size_t>(classes), std::vector<int64_t>(static_cast<size_t>(classes), 0));
  for (size_t i = 0; i < p.truth.size(); ++i) {
    const int32_t t = p.truth[i], y = p.classification.labels[i];
    if (t < 0 || t >= classes)
      throw InputError(p.items[i] + ": label " + std::to_string(t) + " is outside the head's " + std::to_string(classes) + " classes");
    ++e.total;
    e.correct += t == y;
    ++e.per_class[static_cast<size_t>(t)].total;
    e.per_class[static_cast<size_t>(t)].correct += t == y;
    ++e.confusion[static_cast<size_t>(t)][static_cast<size_t>(y)];
  }
  return e;
}

}  // namespace fednode
