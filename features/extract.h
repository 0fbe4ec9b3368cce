// Images in, features out: what `fednode extract` does, as a library call that `simulate`, `run`
// and embedding applications can use too. Runs a backbone over Fashion-MNIST or an image folder,
// through the feature cache.
#pragma once

#include "core/types.h"
#include "features/preprocess.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace fednode {

struct ExtractOptions {
  std::string backbone;          // TorchScript file with its sidecar; "": default_backbone_path()
  std::string dataset;           // "fashion-mnist", or "" when images_dir is given
  std::string dataset_dir;       // Fashion-MNIST IDX folder; "": default_fashion_mnist_dir()
  std::string images_dir;        // one sub-folder per class, PNG / JPEG inside
  std::string split = "train";   // Fashion-MNIST: train | test
  int64_t limit = -1;            // Fashion-MNIST: the first N; folders: N round-robin over classes
  int input_size = 0;            // 0: the sidecar's input_size
  int threads = 0;               // 0: one per core
  int batch_size = 32;
  std::string cache_dir;         // "": default_cache_dir()
  bool use_cache = true;
  bool progress = true;          // progress line on stderr
  bool freeze = true;            // BackboneOptions::freeze
  bool optimize = false;         // BackboneOptions::optimize
  const std::atomic<bool>* stop = nullptr;  // RunOptions::stop; nothing is cached when it fires
  // Image folders: a file that does not decode (truncated, empty, not an image) is left out and
  // listed in Extracted::skipped, instead of ending the extraction with its error.
  bool skip_bad = false;
};

struct SkippedImage {
  std::string file;    // relative to the image folder
  std::string reason;  // the decoder's error, naming the file
};

struct Extracted {
  Features features;
  std::vector<std::string> class_names;  // label i is class_names[i]
  std::string fingerprint;               // backbone fingerprint (model bytes + preprocessing)
  std::string description;               // e.g. "fashion-mnist train, first 1000 images"
  std::string cache_entry;               // the cache folder read or written; "" without cache
  bool from_cache = false;
  double seconds = 0;                    // wall time of the whole call
  std::vector<SkippedImage> skipped;     // with ExtractOptions::skip_bad, in folder order
  std::vector<std::string> ignored;      // image folders: files that are not .png/.jpg/.jpeg
};

// Throws InputError for bad options, files or models.
Extracted extract_features(const ExtractOptions& options);

// The backbone file ExtractOptions::backbone names ("": the bundled one) and its preprocessing
// from its sidecar, with `input_size` (unless 0) in place of the sidecar's: what extract_features
// runs. Throws InputError naming a missing file or a bad size.
struct BackboneFile {
  std::string model;
  Preprocessing preprocessing;
};
BackboneFile open_backbone_file(const std::string& backbone, int input_size);

// Fashion-MNIST's ten class names, label i's at i.
const std::vector<std::string>& fashion_mnist_class_names();
// The names of PREFIX_classes.txt for PREFIX_X.npy, one per line, when that file exists; else empty.
std::vector<std::string> class_names_beside(const std::string& features_npy);

// PREFIX_X.npy (float32 [n, d]), PREFIX_y.npy (int32 [n]) and PREFIX_classes.txt (one class name
// per line, line i naming label i).
void write_extracted(const std::string& prefix, const Extracted& extracted);

}  // namespace fednode
