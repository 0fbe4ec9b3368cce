// fednode train-generator: FGL's built-in generator (methods/fgl/torch_generator.h), trained on a
// public image set that no node of the federation holds, written as a TorchScript file with its
// sidecar (vocabulary, geometry, and what it has seen).
#include "cli/commands.h"
#include "cli/output_path.h"
#include "cli/public_images.h"
#include "core/digest.h"
#include "core/options.h"
#include "core/torch_library.h"
#include "core/version.h"
#include "methods/fgl/torch_generator.h"

#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

namespace fednode::cli {
namespace {

const char* kHelp =
    "usage: fednode train-generator (--dataset fashion-mnist [--from A] [--to B] | --images DIR) --out MODEL.pt\n"
    "       [--conditioning label|text] [--epochs 20] [--latent 64] [--width 64] [--batch-size 64]\n"
    "       [--lr 0.0002] [--seed 1] [--threads T] [--quiet]\n"
    "trains FGL's built-in generator (a DCGAN, docs/methods/fgl.md) and writes MODEL.pt (TorchScript:\n"
    "forward(z, labels), or with --conditioning text encode(texts, negative_texts) and\n"
    "forward(z, text_embedding), giving images in [0, 1]) and MODEL.pt.generator (its sidecar: kind,\n"
    "classes, geometry, provenance). It is a stand-in for a foundation generator: it can draw only\n"
    "what it was trained on, so train it on images no node of the federation holds.\n"
    "input (images of a side that is a multiple of 4):\n"
    "%s"
    "training:\n"
    "  --conditioning label      draw by class name (label), or by prompt (text: a learnt bag of words\n"
    "                            over a few phrasings of each class name, FGL's prompt among them)\n"
    "  --epochs, --latent (z's width), --width (hidden planes), --batch-size, --lr, --seed\n"
    "  --threads T               LibTorch threads (default: one per core)\n";

}  // namespace

int cmd_train_generator(const std::vector<std::string>& argv) {
  const Args a(argv,
               {"dataset", "images", "from", "to", "out", "conditioning", "epochs", "latent", "width", "batch-size", "lr",
                "seed", "threads"},
               {"quiet"});
  if (a.help()) {
    std::cout << with_public_images_help(kHelp);
    return 0;
  }
  const std::string out = a.required("out");
  check_output_path("--out", out);
  check_output_path("--out", generator_sidecar_path(out));
  GeneratorTrainOptions o;
  const std::string conditioning = a.str("conditioning", to_string(o.conditioning));
  if (conditioning == "text") o.conditioning = Conditioning::Text;
  else if (conditioning != "label") throw UsageError("--conditioning must be label or text, got '" + conditioning + "'");
  o.epochs = static_cast<int>(a.integer("epochs", o.epochs, 1, 100000));
  o.latent = static_cast<int>(a.integer("latent", o.latent, 1, 4096));
  o.width = static_cast<int>(a.integer("width", o.width, 1, 4096));
  o.batch_size = static_cast<int>(a.integer("batch-size", o.batch_size, 2, 1 << 16));
  o.lr = a.real("lr", o.lr, 1e-8, 1.0);
  o.seed = static_cast<uint64_t>(a.integer("seed", static_cast<int64_t>(o.seed), 0, INT64_MAX));
  const int threads = static_cast<int>(a.integer("threads", 0, 0, 1024));
  const bool quiet = a.flag("quiet");
  if (!quiet) o.progress = [](const std::string& line) { std::cerr << line << std::endl; };
  const PublicImages data = read_public_images(a);
  if (data.size % 4 != 0)
    throw InputError(data.description + ": " + std::to_string(data.size) + "x" + std::to_string(data.size) +
                     " images: the generator's side must be a multiple of 4");
  set_torch_threads(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  TrainedGenerator g = train_generator(data.pixels, data.labels, data.channels, data.size, data.names, o);
  const std::string images_digest =
      sha256_hex(std::string(reinterpret_cast<const char*>(data.pixels.data()), static_cast<size_t>(data.pixels.size()) * sizeof(float)));
  std::ostringstream recipe;
  recipe << "seed " << o.seed << ", " << o.epochs << " epochs, batch " << o.batch_size << ", lr " << o.lr << ", latent "
         << o.latent << ", width " << o.width << ", " << torch_threads() << " threads";
  g.info.provenance = {data.description, "the images' pixels as float32 have SHA-256 " + images_digest, recipe.str()};
  if (o.conditioning == Conditioning::Text) {
    std::string texts = "texts: each class name as";
    for (const std::string& p : text_generator_phrasings()) texts += " '" + p + "'";
    g.info.provenance.push_back(texts);
  }
  g.info.provenance.push_back("fednode " + std::string(fednode_version()) + " train-generator");
  write_output_file(out, g.module);
  write_output_file(generator_sidecar_path(out), g.info.to_text());
  std::cout << "wrote " << out << " (" << g.module.size() << " bytes, SHA-256 " << sha256_hex(g.module).substr(0, 16)
            << "...) and " << generator_sidecar_path(out) << "\n"
            << "  trained on: " << data.description << "\n"
            << "  " << recipe.str() << ": " << std::fixed << std::setprecision(1) << g.seconds << " s\n";
  return 0;
}

}  // namespace fednode::cli
