// fednode extract: images through a frozen backbone into PREFIX_X.npy / PREFIX_y.npy.
#include "core/options.h"
#include "cli/commands.h"
#include "cli/output_path.h"
#include "features/allocator.h"
#include "features/backbone.h"
#include "features/extract.h"

#include <iomanip>
#include <iostream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode extract (--dataset fashion-mnist | --images DIR) --out PREFIX\n"
    "       [--dataset-dir DIR] [--backbone MODEL.pt] [--split train|test] [--limit N]\n"
    "       [--input-size S] [--threads T] [--batch-size B] [--optimize] [--cache-dir D]\n"
    "       [--no-cache] [--quiet] [--skip-bad]\n"
    "writes PREFIX_X.npy (float32 [n, d]), PREFIX_y.npy (int32 [n]) and PREFIX_classes.txt\n"
    "input:\n"
    "  --dataset fashion-mnist   Fashion-MNIST from the Debian package (FEDNODE_FASHION_MNIST_DIR\n"
    "                            or --dataset-dir DIR elsewhere); --split train (default) or test\n"
    "  --images DIR              DIR/<class>/<image>.png|jpg, classes sorted by name; images in a\n"
    "                            class's sub-folders belong to it (torchvision's ImageFolder order)\n"
    "  --skip-bad                leave out files that do not decode (truncated, empty), listing\n"
    "                            each and why, instead of stopping at the first\n"
    "  --limit N                 Fashion-MNIST: the first N images; folders: N round-robin over classes\n"
    "backbone:\n"
    "  --backbone MODEL.pt       TorchScript model with MODEL.pt.preprocessing beside it\n"
    "                            (default, or 'default': the bundled MobileNetV2, models/README.md)\n"
    "  --input-size S            overrides the preprocessing file's input_size\n"
    "  --threads T               LibTorch threads (default: one per core)\n"
    "  --batch-size B            images per forward pass (default 32)\n"
    "  --optimize                also torch.jit.optimize_for_inference (oneDNN prepacking): faster on\n"
    "                            some idle machines, slower on busy ones; features move by up to ~5e-5\n"
    "cache:\n"
    "  --cache-dir D             feature cache (default $XDG_CACHE_HOME/fednode or ~/.cache/fednode)\n"
    "  --no-cache                neither read nor write the cache\n";

}  // namespace

int cmd_extract(const std::vector<std::string>& argv) {
  const Args a(argv,
               {"backbone", "dataset", "dataset-dir", "images", "out", "split", "limit", "input-size",
                "threads", "batch-size", "cache-dir"},
               {"no-cache", "quiet", "optimize", "skip-bad"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  ExtractOptions o;
  o.backbone = a.str("backbone", "");
  if (o.backbone == "default") o.backbone.clear();  // as simulate and topology files spell it
  o.dataset = a.str("dataset", "");
  o.dataset_dir = a.str("dataset-dir", "");
  o.images_dir = a.str("images", "");
  if (a.has("dataset") == a.has("images")) throw UsageError("give exactly one of --dataset and --images");
  if (a.has("dataset") && o.dataset != "fashion-mnist")
    throw UsageError("--dataset must be fashion-mnist, got '" + o.dataset + "'");
  if (a.has("images") && (a.has("split") || a.has("dataset-dir")))
    throw UsageError("--split and --dataset-dir apply to --dataset; point --images at the split's folder");
  const std::string prefix = a.required("out");
  if (prefix.empty()) throw UsageError("--out needs a non-empty prefix");
  o.split = a.str("split", "train");
  if (o.split != "train" && o.split != "test") throw UsageError("--split must be train or test, got '" + o.split + "'");
  o.limit = a.integer("limit", -1, 1, 1LL << 40);
  o.input_size = static_cast<int>(a.integer("input-size", 0, 8, 2048));
  o.threads = static_cast<int>(a.integer("threads", 0, 1, 1024));
  o.batch_size = static_cast<int>(a.integer("batch-size", 32, 1, 4096));
  o.cache_dir = a.str("cache-dir", "");
  o.use_cache = !a.flag("no-cache");
  o.progress = !a.flag("quiet");
  o.optimize = a.flag("optimize");
  o.skip_bad = a.flag("skip-bad");
  if (o.skip_bad && !a.has("images")) throw UsageError("--skip-bad applies to --images");
  for (const char* suffix : {"_X.npy", "_y.npy", "_classes.txt"}) check_output_path("--out", prefix + suffix);

  const Extracted e = [&] {
    BatchAllocations batch_buffers;
    return extract_features(o);
  }();
  write_extracted(prefix, e);
  std::cout << "wrote " << prefix << "_X.npy (" << e.features.X.rows() << " x " << e.features.X.cols() << "), "
            << prefix << "_y.npy, " << prefix << "_classes.txt\n"
            << "  data:        " << e.description << "\n"
            << "  backbone:    " << (o.backbone.empty() ? default_backbone_path() : o.backbone) << "\n"
            << "  fingerprint: " << e.fingerprint << "\n"
            << "  " << (e.from_cache ? "from cache:  " : "extracted:   ") << std::fixed << std::setprecision(1)
            << e.seconds << " s"
            << (e.cache_entry.empty() ? std::string() : "  (" + e.cache_entry + ")") << "\n";
  if (!e.skipped.empty()) {
    std::cout << "  skipped:     " << e.skipped.size() << " file(s) that did not decode:\n";
    for (const SkippedImage& bad : e.skipped) std::cout << "    " << bad.reason << "\n";
  }
  if (!e.ignored.empty()) {
    // Listed in full up to a point: a folder of thumbnails and sidecars could name thousands.
    constexpr size_t kListed = 20;
    std::cout << "  ignored:     " << e.ignored.size() << " file(s) not ending in .png, .jpg or .jpeg:\n";
    for (size_t i = 0; i < e.ignored.size() && i < kListed; ++i) std::cout << "    " << e.ignored[i] << "\n";
    if (e.ignored.size() > kListed) std::cout << "    ... and " << e.ignored.size() - kListed << " more\n";
  }
  return 0;
}

}  // namespace fednode::cli
