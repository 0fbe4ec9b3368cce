// fednode predict: a node's head (or a head file) classifies images or features; CSV or JSON out,
// and with labels its accuracy, per class and as a confusion matrix (docs/cli.md).
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/prediction_output.h"
#include "core/options.h"
#include "node/prediction.h"

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode predict (--state DIR | --topology FILE --id ID | --head FILE) [--personal]\n"
    "       (--images DIR [--skip-bad] | --dataset fashion-mnist [--split train|test] [--limit N]\n"
    "        [--dataset-dir DIR] | --features X.npy [--labels y.npy])\n"
    "       [--top K] [--logits] [--format csv|json] [--out FILE] [--html DIR]\n"
    "       [--backbone MODEL.pt [--input-size S]] [--threads T] [--batch-size B] [--quiet]\n"
    "classifies with a node's head, reading images the way the node's own data were read (its\n"
    "backbone, preprocessing and feature expansion, recorded in the head file)\n"
    "head:\n"
    "  --state DIR               a node's state directory (its head file DIR/head)\n"
    "  --topology FILE --id ID   the state directory the topology file gives node ID (id or name)\n"
    "  --head FILE               a head file (fednode head info FILE shows what it holds)\n"
    "  --personal                personalised FedCGS: the node's personal head (DIR/personal_head)\n"
    "data:\n"
    "  --images DIR              class sub-folders (named after the head's classes, or by class\n"
    "                            number: labelled) or images directly in DIR (unlabelled, any depth)\n"
    "  --skip-bad                leave out files that do not decode, listing each and why\n"
    "  --dataset fashion-mnist   --split test (default) or train, --limit N: the first N images\n"
    "  --features X.npy          rows as the node's data came (before any feature expansion);\n"
    "                            --labels y.npy (int32) to score them\n"
    "output:\n"
    "  --format csv|json         csv (default): item, label, class, probability per row (K of each\n"
    "                            with --top K), the true label and class when known\n"
    "  --logits                  also every class's score (the head's logits, as an export gives them)\n"
    "  --out FILE                write the predictions there (default: stdout); the summary goes\n"
    "                            to stdout then, else to stderr\n"
    "  --html DIR                with labels: DIR/index.html with accuracy, per-class accuracy and\n"
    "                            the confusion matrix\n"
    "backbone:\n"
    "  --backbone MODEL.pt       instead of the file the head recorded (moved, or features that came\n"
    "                            from .npy); refused unless it gives the head's fingerprint\n"
    "  --input-size S            with --backbone, for a head that recorded no preprocessing\n"
    "  --threads T, --batch-size B   the backbone's LibTorch threads (default one per core) and\n"
    "                            images per forward pass (default 32, as extract)\n";

}  // namespace

int cmd_predict(const std::vector<std::string>& argv) {
  const Args a(argv,
               {"state", "topology", "id", "head", "images", "dataset", "split", "limit", "dataset-dir", "features",
                "labels", "top", "format", "out", "html", "backbone", "input-size", "threads", "batch-size"},
               {"personal", "skip-bad", "quiet", "logits"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  const bool personal = a.flag("personal");
  const std::string file = head_file_argument(a, personal);
  const int inputs = a.has("images") + a.has("dataset") + a.has("features");
  if (inputs != 1) throw UsageError("give exactly one of --images DIR, --dataset fashion-mnist and --features X.npy");
  if (a.has("dataset") && a.str("dataset", "") != "fashion-mnist")
    throw UsageError("--dataset must be fashion-mnist, got '" + a.str("dataset", "") + "'");
  if (!a.has("dataset") && (a.has("split") || a.has("limit") || a.has("dataset-dir")))
    throw UsageError("--split, --limit and --dataset-dir apply to --dataset");
  if (a.has("labels") && !a.has("features")) throw UsageError("--labels goes with --features");
  if (a.flag("skip-bad") && !a.has("images")) throw UsageError("--skip-bad applies to --images");
  if (a.has("input-size") && !a.has("backbone")) throw UsageError("--input-size goes with --backbone");
  const std::string format = a.str("format", "csv");
  if (format != "csv" && format != "json") throw UsageError("--format must be csv or json, got '" + format + "'");
  const int top = static_cast<int>(a.integer("top", 1, 1, 1000));
  const std::string out = a.str("out", "");
  if (!out.empty()) check_output_path("--out", out);
  const std::string html = a.str("html", "");

  ClassifierOptions o;
  o.backbone = a.str("backbone", "");
  o.input_size = static_cast<int>(a.integer("input-size", 0, 8, 2048));
  o.threads = static_cast<int>(a.integer("threads", 0, 1, 1024));
  o.batch_size = static_cast<int>(a.integer("batch-size", 32, 1, 4096));
  o.progress = !a.flag("quiet");
  const Classifier classifier = Classifier::from_file(file, o);
  if (top > classifier.head().num_classes())
    throw UsageError("--top " + std::to_string(top) + ": the head has " + std::to_string(classifier.head().num_classes()) + " classes");

  const Predictions p = a.has("images")    ? predict_image_folder(classifier, a.str("images", ""), a.flag("skip-bad"))
                        : a.has("dataset") ? predict_fashion_mnist(classifier, a.str("split", "test"), a.integer("limit", -1, 1, 1LL << 40),
                                                                   a.str("dataset-dir", ""))
                                           : predict_features(classifier, a.str("features", ""), a.str("labels", ""));
  if (!html.empty() && p.truth.empty()) throw UsageError("--html draws the accuracy, which needs labelled data");
  const Evaluation e = evaluate(p, classifier.head().num_classes());

  const bool logits = a.flag("logits");
  const std::string text = format == "csv" ? predictions_csv(p, classifier.card(), top, logits)
                                           : predictions_json(p, e, classifier, file, top, logits);
  if (out.empty()) {
    std::cout << text;
  } else {
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f.flush()) throw InputError("--out " + out + ": cannot write");
  }
  std::ostream& summary = out.empty() ? std::cerr : std::cout;
  summary << "predict: " << p.items.size() << " predictions with " << file << " (" << classifier.head().kind() << ", "
          << classifier.card().recipe.describe() << ") on " << p.description << "\n";
  for (const std::string& why : p.skipped) summary << "  skipped: " << why << "\n";
  if (!p.truth.empty()) summary << summary_text(e, classifier.card());
  if (!html.empty()) {
    write_prediction_html(html, p, e, classifier, file);
    summary << "wrote " << (std::filesystem::path(html) / "index.html").string() << "\n";
  }
  return 0;
}

}  // namespace fednode::cli
