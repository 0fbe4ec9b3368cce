// fednode export: a node's classifier as one TorchScript module and its JSON sidecar.
#include "cli/commands.h"
#include "cli/output_path.h"
#include "core/options.h"
#include "node/classifier_export.h"
#include "topology/topology.h"

#include <filesystem>
#include <iostream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode export (--state DIR | --topology FILE --id ID | --head FILE) [--personal]\n"
    "       --out MODEL.pt [--head-only] [--backbone MODEL.pt [--input-size S]]\n"
    "writes one TorchScript module, preprocessing + frozen backbone + feature expansion + head, that\n"
    "torch.jit.load(\"MODEL.pt\")(images) in Python or torch::jit::load in C++ runs to logits, and\n"
    "MODEL.pt.json: class names, input size, normalisation, fingerprint, method, run, contributors\n"
    "  images: [N, C, H, W] (or [C, H, W]) uint8 pixel values as torchvision.io.read_image gives\n"
    "          them, or float in [0, 1] as ToTensor gives them; any size, resized as fednode does\n"
    "  the module also has features(images) (the head's input) and head(x)\n"
    "  --head-only    forward takes the data's features (rows as `fednode extract` writes them,\n"
    "                 before any expansion) instead of images\n"
    "  --state, --topology/--id, --head, --personal, --backbone, --input-size: as fednode predict\n";

}  // namespace

int cmd_export(const std::vector<std::string>& argv) {
  const Args a(argv, {"state", "topology", "id", "head", "out", "backbone", "input-size"}, {"personal", "head-only"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  const std::string out = a.required("out");
  check_output_path("--out", out);
  check_output_path("--out", out + ".json");
  ClassifierOptions o;
  o.backbone = a.str("backbone", "");
  if (a.has("input-size") && o.backbone.empty()) throw UsageError("--input-size goes with --backbone");
  o.input_size = static_cast<int>(a.integer("input-size", 0, 8, 2048));
  const std::string file = head_file_argument(a, a.flag("personal"));
  const Classifier classifier = Classifier::from_file(file, o);
  const bool head_only = a.flag("head-only");
  export_classifier(classifier, out, head_only);
  std::cout << "wrote " << out << " (" << classifier.head().kind() << " head, " << classifier.head().num_classes()
            << " classes, " << (head_only ? "features in" : classifier.card().recipe.describe() + " in") << ") and " << out
            << ".json\n";
  return 0;
}

}  // namespace fednode::cli
