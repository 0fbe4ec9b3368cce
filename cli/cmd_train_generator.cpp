// fednode train-generator: FGL's built-in generator (methods/fgl/torch_generator.h), trained on a
// public image set that no node of the federation holds, written as a TorchScript file with its
// sidecar (vocabulary, geometry, and what it has seen).
#include "cli/commands.h"
#include "cli/output_path.h"
#include "core/digest.h"
#include "core/options.h"
#include "core/torch_library.h"
#include "core/version.h"
#include "features/extract.h"
#include "features/idx.h"
#include "features/images.h"
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
    "input:\n"
    "  --dataset fashion-mnist   the training split's images [A, B) (default 50000 to 60000: the part\n"
    "                            `simulate --train-limit 50000` leaves out of the federation)\n"
    "  --images DIR              DIR/<class>/<image>.png|jpg, every image square and of one size\n"
    "                            (a multiple of 4) and channel count; class names are the folders'\n"
    "training:\n"
    "  --conditioning label      draw by class name (label), or by prompt (text: a learnt bag of words\n"
    "                            over a few phrasings of each class name, FGL's prompt among them)\n"
    "  --epochs, --latent (z's width), --width (hidden planes), --batch-size, --lr, --seed\n"
    "  --threads T               LibTorch threads (default: one per core)\n";

struct PublicImages {
  MatrixF pixels;
  Labels labels;
  int channels = 1, size = 0;
  std::vector<std::string> names;
  std::string description;
};

PublicImages fashion_mnist_range(int64_t from, int64_t to) {
  Features all = load_fashion_mnist(default_fashion_mnist_dir(), "train", to);
  if (all.size() < to)
    throw UsageError("--to " + std::to_string(to) + ": the training split has " + std::to_string(all.size()) + " images");
  std::vector<int64_t> rows;
  for (int64_t i = from; i < to; ++i) rows.push_back(i);
  Features part = all.subset(rows);
  PublicImages p;
  p.pixels = std::move(part.X);
  p.labels = std::move(part.y);
  p.size = 28;
  p.names = fashion_mnist_class_names();
  p.description = "fashion-mnist training images " + std::to_string(from) + " to " + std::to_string(to - 1) + " (" +
                  std::to_string(to - from) + " images, " + default_fashion_mnist_dir() + ")";
  return p;
}

PublicImages image_folder(const std::string& root) {
  const ImageFolder folder = scan_image_folder(root);
  PublicImages p;
  p.names = folder.class_names;
  for (size_t i = 0; i < folder.files.size(); ++i) {
    const std::string path = folder.root + "/" + folder.files[i];
    const Image image = read_image(path);
    if (i == 0) {
      p.size = image.width;
      p.channels = image.channels;
      if (image.width != image.height || image.width % 4 != 0)
        throw InputError(path + ": " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                         ": the generator's images must be square with a side that is a multiple of 4");
      p.pixels.resize(static_cast<int64_t>(folder.files.size()), int64_t{p.channels} * p.size * p.size);
    } else if (image.width != p.size || image.height != p.size || image.channels != p.channels) {
      throw InputError(path + ": " + std::to_string(image.width) + "x" + std::to_string(image.height) + " with " +
                       std::to_string(image.channels) + " channels; the first image has " + std::to_string(p.size) +
                       "x" + std::to_string(p.size) + " with " + std::to_string(p.channels));
    }
    const int S = p.size, C = p.channels;
    for (int c = 0; c < C; ++c)
      for (int q = 0; q < S * S; ++q)
        p.pixels(static_cast<int64_t>(i), c * S * S + q) =
            static_cast<float>(image.pixels[static_cast<size_t>(q * C + c)]) / 255.0f;
    p.labels.push_back(folder.labels[i]);
  }
  p.description = root + " (" + std::to_string(folder.files.size()) + " images in " + std::to_string(p.names.size()) +
                  " classes)";
  return p;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw InputError(path + ": cannot write");
}

}  // namespace

int cmd_train_generator(const std::vector<std::string>& argv) {
  const Args a(argv,
               {"dataset", "images", "from", "to", "out", "conditioning", "epochs", "latent", "width", "batch-size", "lr",
                "seed", "threads"},
               {"quiet"});
  if (a.help()) {
    std::cout << kHelp;
    return 0;
  }
  if (a.has("dataset") == a.has("images")) throw UsageError("give exactly one of --dataset and --images");
  if (a.has("dataset") && a.str("dataset", "") != "fashion-mnist")
    throw UsageError("--dataset must be fashion-mnist, got '" + a.str("dataset", "") + "'");
  if (a.has("images") && (a.has("from") || a.has("to"))) throw UsageError("--from and --to apply to --dataset");
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
  int64_t from = 50000, to = 60000;
  if (a.has("dataset")) {
    from = a.integer("from", from, 0, 60000);
    to = a.integer("to", to, 1, 60000);
    if (from >= to) throw UsageError("--from " + std::to_string(from) + " must be below --to " + std::to_string(to));
  }
  const PublicImages data = a.has("dataset") ? fashion_mnist_range(from, to) : image_folder(a.str("images", ""));
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
  write_file(out, g.module);
  write_file(generator_sidecar_path(out), g.info.to_text());
  std::cout << "wrote " << out << " (" << g.module.size() << " bytes, SHA-256 " << sha256_hex(g.module).substr(0, 16)
            << "...) and " << generator_sidecar_path(out) << "\n"
            << "  trained on: " << data.description << "\n"
            << "  " << recipe.str() << ": " << std::fixed << std::setprecision(1) << g.seconds << " s\n";
  return 0;
}

}  // namespace fednode::cli
