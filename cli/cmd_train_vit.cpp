// fednode train-vit: FedMITR's pretrained start. The paper's clients fine-tune a pretrained DeiT;
// none can be had here, so this trains the built-in ViT on labelled images no node holds and
// writes it as a TorchScript file in `--vit-script`'s interface, whose parameters every node then
// starts from (docs/methods/fedmitr.md, "A pretrained start").
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/public_images.h"
#include "core/digest.h"
#include "core/elapsed.h"
#include "core/options.h"
#include "core/rng.h"
#include "core/torch_library.h"
#include "core/version.h"
#include "methods/fedmitr/vit.h"
#include "methods/fedmitr/vit_head.h"

#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <thread>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode train-vit (--dataset fashion-mnist [--from A] [--to B] | --images DIR) --out VIT.pt\n"
    "       [--classes N] [--vit-patch 7] [--vit-dim 64] [--vit-depth 4] [--vit-heads 4] [--vit-mlp-dim 128]\n"
    "       [--epochs 10] [--lr 0.05] [--batch-size 64] [--seed 1] [--threads T] [--quiet]\n"
    "trains FedMITR's built-in ViT on images no node of the federation holds and writes VIT.pt, a\n"
    "TorchScript file for `--vit-script VIT.pt`: its parameters are the federation's shared start, as\n"
    "the paper's clients start from a pretrained DeiT (docs/methods/fedmitr.md, \"A pretrained start\").\n"
    "input:\n"
    "%s"
    "model:\n"
    "  --classes N               the federation's classes, when they are not the images' (pretraining on\n"
    "                            classes the federation does not use): the classifier is then started\n"
    "                            afresh from --seed, every other layer kept\n"
    "  --vit-patch, --vit-dim, --vit-depth, --vit-heads, --vit-mlp-dim   the architecture (as fedmitr's)\n"
    "training (SGD, momentum 0.9, weight decay 1e-4, as a client's):\n"
    "  --epochs, --lr, --batch-size, --seed (the start and the batches)\n"
    "  --threads T               LibTorch threads (default: one per core)\n";

// `trained` with its classifier replaced by a fresh one for `classes` (drawn as vit_init draws it,
// from `seed`): the head's weight [classes, dim] and bias [classes] end the flat vector.
VitModel with_classes(const VitModel& trained, int classes, uint64_t seed) {
  VitSpec spec = trained.spec;
  spec.classes = classes;
  VitModel out = vit_init(spec, seed);
  const size_t body = trained.parameters.size() - static_cast<size_t>(trained.spec.classes) * (trained.spec.dim + 1);
  std::copy(trained.parameters.begin(), trained.parameters.begin() + static_cast<std::ptrdiff_t>(body), out.parameters.begin());
  return out;
}

}  // namespace

int cmd_train_vit(const std::vector<std::string>& argv) {
  const Args a(argv,
               {"dataset", "images", "from", "to", "out", "classes", "vit-patch", "vit-dim", "vit-depth", "vit-heads",
                "vit-mlp-dim", "epochs", "lr", "batch-size", "seed", "threads"},
               {"quiet"});
  if (a.help()) {
    std::cout << with_public_images_help(kHelp);
    return 0;
  }
  const std::string out = a.required("out");
  check_output_path("--out", out);
  VitSpec spec;
  spec.patch = static_cast<int>(a.integer("vit-patch", spec.patch, 1, 4096));
  spec.dim = static_cast<int>(a.integer("vit-dim", spec.dim, 1, 1 << 14));
  spec.depth = static_cast<int>(a.integer("vit-depth", spec.depth, 1, 256));
  spec.heads = static_cast<int>(a.integer("vit-heads", spec.heads, 1, 1 << 14));
  spec.mlp_dim = static_cast<int>(a.integer("vit-mlp-dim", spec.mlp_dim, 1, 1 << 16));
  VitTrainOptions train;
  train.epochs = static_cast<int>(a.integer("epochs", 10, 1, 100000));
  train.lr = a.real("lr", train.lr, 1e-8, 10.0);
  train.batch_size = static_cast<int>(a.integer("batch-size", train.batch_size, 1, 1 << 20));
  const uint64_t seed = static_cast<uint64_t>(a.integer("seed", 1, 0, INT64_MAX));
  train.seed = derive_seed(seed, {static_cast<uint64_t>(Purpose::HeadShuffle), 0x7E1});
  const int threads = static_cast<int>(a.integer("threads", 0, 0, 1024));
  const bool quiet = a.flag("quiet");
  const PublicImages data = read_public_images(a);
  spec.channels = data.channels;
  spec.image_size = data.size;
  spec.classes = static_cast<int>(data.names.size());
  const int classes = static_cast<int>(a.integer("classes", spec.classes, 1, 1 << 20));
  spec.validate("the ViT for " + std::to_string(data.size) + "x" + std::to_string(data.size) + " images");
  set_torch_threads(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  if (!quiet)
    std::cerr << "train-vit: " << spec.parameter_count() << " parameters, " << train.epochs << " epochs on "
              << data.description << std::endl;
  const auto t0 = std::chrono::steady_clock::now();
  const VitModel trained = vit_train(vit_init(spec, seed), data.pixels, data.labels, train);
  const double seconds = seconds_since(t0);
  Features seen;
  seen.X = data.pixels;
  seen.y = data.labels;
  seen.num_classes = spec.classes;
  const double accuracy = VitHead(trained).accuracy(seen);
  const VitModel start = classes == spec.classes ? trained : with_classes(trained, classes, seed);
  const std::string bytes = vit_script_file(start);
  write_output_file(out, bytes);
  std::cout << "wrote " << out << " (" << bytes.size() << " bytes, SHA-256 " << sha256_hex(bytes).substr(0, 16) << "..., "
            << start.parameters.size() << " parameters, " << classes << " classes"
            << (classes == spec.classes ? "" : ", the classifier started afresh") << ")\n"
            << "  trained on: " << data.description << "\n"
            << "  seed " << seed << ", " << train.epochs << " epochs, batch " << train.batch_size << ", lr " << train.lr
            << ", " << torch_threads() << " threads: " << std::fixed << std::setprecision(1) << seconds
            << " s; accuracy on the images it trained on " << std::setprecision(4) << accuracy << "\n"
            << "  fednode " << fednode_version() << " train-vit; use it with --vit-script " << out << "\n";
  return 0;
}

}  // namespace fednode::cli
