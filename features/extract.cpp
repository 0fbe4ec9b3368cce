#include "features/extract.h"

#include "features/backbone.h"
#include "features/feature_cache.h"
#include "features/idx.h"
#include "features/image_sources.h"
#include "features/images.h"
#include "features/npy.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

namespace fs = std::filesystem;

namespace fednode {

namespace {

const std::vector<std::string> kFashionMnistClasses = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// Size and modification time stand in for the content: hashing every image on each run would
// cost as much as a small extraction, and any edit changes at least the time.
std::string file_stamp(const fs::path& path) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw InputError(path.string() + ": cannot stat: " + ec.message());
  const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  return (ec ? path : canonical).string() + " size=" + std::to_string(size) + " mtime=" + std::to_string(mtime);
}

// Everything extract_features needs to know about its input before deciding whether the cache
// answers: identity for the key, then a way to produce the images and labels on a miss.
struct DatasetPlan {
  std::string identity;
  std::string description;
  std::vector<std::string> class_names;
  // Fashion-MNIST
  std::string images_path, labels_path;
  // Image folder
  ImageFolder folder;
};

DatasetPlan plan_dataset(const ExtractOptions& o) {
  DatasetPlan plan;
  const std::string limit_text = o.limit < 0 ? "all" : std::to_string(o.limit);
  if (!o.images_dir.empty()) {
    plan.folder = scan_image_folder(o.images_dir, o.limit);
    plan.class_names = plan.folder.class_names;
    std::error_code ec;
    plan.identity = "image-folder\nroot=" + fs::weakly_canonical(o.images_dir, ec).string() + "\nlimit=" +
                    limit_text + "\nclasses=";
    for (const auto& c : plan.class_names) plan.identity += c + "/";
    plan.identity += "\n";
    for (size_t i = 0; i < plan.folder.files.size(); ++i)
      plan.identity += std::to_string(plan.folder.labels[i]) + " " +
                       file_stamp(fs::path(o.images_dir) / plan.folder.files[i]) + "\n";
    plan.description = "image folder " + o.images_dir + ", " + std::to_string(plan.folder.files.size()) +
                       " images in " + std::to_string(plan.class_names.size()) + " classes";
    return plan;
  }
  const std::string dir = o.dataset_dir.empty() ? default_fashion_mnist_dir() : o.dataset_dir;
  const std::string prefix = o.split == "train" ? "train" : "t10k";
  plan.images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  plan.labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
  plan.identity = "fashion-mnist\nsplit=" + o.split + "\nlimit=" + limit_text + "\nimages=" +
                  file_stamp(plan.images_path) + "\nlabels=" + file_stamp(plan.labels_path) + "\n";
  plan.description = "fashion-mnist " + o.split + (o.limit < 0 ? ", all images" : ", first " + limit_text + " images");
  plan.class_names = kFashionMnistClasses;
  return plan;
}

// Removes the rows of the files that did not decode and says which they were.
void drop_skipped(const std::map<int64_t, std::string>& bad, const ImageFolder& folder, Features& f,
                  std::vector<SkippedImage>& skipped) {
  const int64_t n = f.size(), kept = n - static_cast<int64_t>(bad.size());
  if (kept == 0) throw InputError(folder.root + ": none of its " + std::to_string(n) + " images could be decoded");
  MatrixF X(kept, f.dim());
  Labels y;
  y.reserve(static_cast<size_t>(kept));
  for (int64_t i = 0, row = 0; i < n; ++i) {
    if (bad.count(i)) continue;
    X.row(row++) = f.X.row(i);
    y.push_back(f.y[static_cast<size_t>(i)]);
  }
  f.X = std::move(X);
  f.y = std::move(y);
  for (const auto& [i, why] : bad) skipped.push_back({folder.files[static_cast<size_t>(i)], why});
}

void check_options(const ExtractOptions& o) {
  if (o.images_dir.empty() == o.dataset.empty())
    throw InputError("extract: give exactly one input, a dataset (fashion-mnist) or an image folder");
  if (!o.dataset.empty() && o.dataset != "fashion-mnist")
    throw InputError("extract: unknown dataset '" + o.dataset + "' (known: fashion-mnist)");
  if (!o.dataset.empty() && o.split != "train" && o.split != "test")
    throw InputError("extract: unknown split '" + o.split + "' (expected train or test)");
  if (o.limit == 0 || o.limit < -1) throw InputError("extract: limit must be positive (or -1 for all)");
  if (o.batch_size < 1 || o.batch_size > 4096) throw InputError("extract: batch size must be in [1, 4096]");
  if (o.threads < 0 || o.threads > 1024) throw InputError("extract: threads must be in [0, 1024]");
}

}  // namespace

BackboneFile open_backbone_file(const std::string& backbone, int input_size) {
  BackboneFile f;
  f.model = backbone.empty() ? default_backbone_path() : backbone;
  require_regular_file(f.model, "backbone model file");
  const std::string sidecar = sidecar_path(f.model);
  std::error_code ec;
  if (!fs::exists(sidecar, ec))
    throw InputError(sidecar + ": missing; every backbone needs its preprocessing file next to it "
                     "(see docs/backbones.md)");
  f.preprocessing = Preprocessing::load(sidecar);
  if (input_size != 0) {
    f.preprocessing.input_size = input_size;
    f.preprocessing.validate("--input-size");
  }
  return f;
}

Extracted extract_features(const ExtractOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  check_options(o);
  const auto [model, pre] = open_backbone_file(o.backbone, o.input_size);

  Extracted result;
  result.fingerprint = backbone_fingerprint(model, pre);
  DatasetPlan plan = plan_dataset(o);
  result.class_names = plan.class_names;
  result.ignored = plan.folder.ignored;
  result.description = plan.description;
  // Freezing and optimize_for_inference may move features by float rounding; each way of running
  // the module has entries of its own.
  const std::string execution = o.optimize ? "optimized" : o.freeze ? "frozen" : "as-loaded";
  const CacheKey key{result.fingerprint, plan.identity + "execution=" + execution + "\n", plan.description};

  const std::string cache_root = o.use_cache ? (o.cache_dir.empty() ? default_cache_dir() : o.cache_dir) : "";
  std::unique_ptr<FeatureCache> cache;
  if (!cache_root.empty()) {
    cache = std::make_unique<FeatureCache>(cache_root);
    result.cache_entry = cache->entry_path(key);
    std::string problem;
    if (auto cached = cache->load(key, &problem)) {
      result.features = std::move(*cached);
      result.from_cache = true;
      result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (o.progress)
        std::fprintf(stderr, "extract: %s from the feature cache (%s)\n", plan.description.c_str(),
                     result.cache_entry.c_str());
      return result;
    }
    if (!problem.empty())
      std::fprintf(stderr, "extract: damaged feature-cache entry, recomputing: %s\n", problem.c_str());
  }

  BackboneOptions bo;
  bo.threads = o.threads;
  bo.freeze = o.freeze;
  bo.optimize = o.optimize;
  const Backbone backbone = Backbone::load(model, pre, bo);
  RunOptions run;
  run.batch_size = o.batch_size;
  run.progress = o.progress;
  run.label = "extract " + plan.description;
  run.stop = o.stop;

  Features& f = result.features;
  f.num_classes = static_cast<int>(plan.class_names.size());
  if (!o.images_dir.empty()) {
    const FolderSource source(plan.folder, o.skip_bad, pre.channels);
    try {
      f.X = backbone.extract(source, run);
    } catch (const InputError& e) {
      if (o.skip_bad) throw;
      throw InputError(std::string(e.what()) + " (--skip-bad leaves such files out, naming each)");
    }
    f.y = plan.folder.labels;
    if (!source.bad().empty()) drop_skipped(source.bad(), plan.folder, f, result.skipped);
  } else {
    IdxImages images = read_idx_images(plan.images_path, o.limit);
    const std::vector<uint8_t> labels = read_idx_labels(plan.labels_path, o.limit);
    if (static_cast<int64_t>(labels.size()) != images.count)
      throw InputError("Fashion-MNIST: " + plan.images_path + " holds " + std::to_string(images.count) +
                       " images but " + plan.labels_path + " holds " + std::to_string(labels.size()) + " labels");
    f.y.resize(labels.size());
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] >= kFashionMnistClasses.size())
        throw InputError(plan.labels_path + ": label " + std::to_string(labels[i]) + " at index " +
                         std::to_string(i) + " is outside [0, 10)");
      f.y[i] = labels[i];
    }
    f.X = backbone.extract(IdxSource(std::move(images), o.split), run);
  }
  f.validate("extract " + plan.description);
  // The cache keys an entry by the files listed, not by which of them decoded: features with
  // files left out would come back next time without the list of what was skipped.
  if (cache && !result.skipped.empty()) {
    std::fprintf(stderr, "extract: not written to the feature cache, since %zu file(s) were skipped\n",
                 result.skipped.size());
    result.cache_entry.clear();
  } else if (cache) {
    try {
      cache->store(key, f);
    } catch (const std::exception& e) {
      // A read-only or full cache folder costs the next run time, not this run its result.
      std::fprintf(stderr, "extract: could not write the feature cache: %s\n", e.what());
      result.cache_entry.clear();
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

const std::vector<std::string>& fashion_mnist_class_names() { return kFashionMnistClasses; }

std::vector<std::string> class_names_beside(const std::string& features_npy) {
  const std::string suffix = "_X.npy";
  if (features_npy.size() <= suffix.size() || features_npy.compare(features_npy.size() - suffix.size(), suffix.size(), suffix) != 0)
    return {};
  const std::string path = features_npy.substr(0, features_npy.size() - suffix.size()) + "_classes.txt";
  std::ifstream in(path);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    names.push_back(line);
  }
  return names;
}

void write_extracted(const std::string& prefix, const Extracted& extracted) {
  write_npy_features(prefix + "_X.npy", extracted.features.X);
  write_npy_labels(prefix + "_y.npy", extracted.features.y);
  const std::string classes = prefix + "_classes.txt";
  std::ofstream out(classes);
  for (const auto& name : extracted.class_names) out << name << "\n";
  out.close();
  if (!out) throw InputError(classes + ": cannot write");
}

}  // namespace fednode
