// `fednode predict` as library calls: the data a classifier is asked about (an image folder,
// Fashion-MNIST, .npy features), read the way `extract` reads them, classified, and scored where
// labels are known.
#pragma once

#include "node/classifier.h"

#include <string>
#include <vector>

namespace fednode {

struct Predictions {
  std::vector<std::string> items;  // an image's path relative to its folder, "test image 12", "row 3"
  Labels truth;                    // empty when the data carry no labels
  Classification classification;
  std::vector<std::string> skipped;  // --skip-bad: files that did not decode, each with why
  std::string description;           // "image folder photos, 120 images in 3 classes"
};

// An image folder: class sub-folders (labelled by matching their names to the head's class names,
// or by class numbers) or a folder with images directly inside (unlabelled, searched at any depth).
// Throws InputError for a class folder that names no class of the head.
Predictions predict_image_folder(const Classifier& classifier, const std::string& dir, bool skip_bad);
// Fashion-MNIST's `split` (train | test), the first `limit` images (-1: all), from `dir` ("": the
// default); labelled.
Predictions predict_fashion_mnist(const Classifier& classifier, const std::string& split, int64_t limit, const std::string& dir = "");
// Features as `fednode extract` writes them (before any expansion), labels optional ("").
Predictions predict_features(const Classifier& classifier, const std::string& features_npy, const std::string& labels_npy);

struct Evaluation {
  int64_t total = 0, correct = 0;
  double accuracy() const { return total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
  std::vector<ClassAccuracy> per_class;            // by true class
  std::vector<std::vector<int64_t>> confusion;     // [true][predicted]
};
// Throws InputError for a label outside the head's classes.
Evaluation evaluate(const Predictions& p, int classes);

}  // namespace fednode
