#include "cli/public_images.h"

#include "features/extract.h"
#include "features/idx.h"
#include "features/images.h"

namespace fednode::cli {
namespace {

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
      if (image.width != image.height)
        throw InputError(path + ": " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                         ": the images must be square");
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

}  // namespace

constexpr const char* kPublicImagesHelp =
    "  --dataset fashion-mnist   the training split's images [A, B) (default 50000 to 60000: the part\n"
    "                            `simulate --train-limit 50000` leaves out of the federation)\n"
    "  --from A, --to B\n"
    "  --images DIR              DIR/<class>/<image>.png|jpg, every image square and of one size and\n"
    "                            channel count; class names are the folders'\n";

std::string with_public_images_help(const std::string& help) {
  std::string out = help;
  out.replace(out.find("%s"), 2, kPublicImagesHelp);
  return out;
}

PublicImages read_public_images(const Args& a) {
  if (a.has("dataset") == a.has("images")) throw UsageError("give exactly one of --dataset and --images");
  if (a.has("dataset") && a.str("dataset", "") != "fashion-mnist")
    throw UsageError("--dataset must be fashion-mnist, got '" + a.str("dataset", "") + "'");
  if (a.has("images")) {
    if (a.has("from") || a.has("to")) throw UsageError("--from and --to apply to --dataset");
    return image_folder(a.str("images", ""));
  }
  const int64_t from = a.integer("from", 50000, 0, 60000), to = a.integer("to", 60000, 1, 60000);
  if (from >= to) throw UsageError("--from " + std::to_string(from) + " must be below --to " + std::to_string(to));
  return fashion_mnist_range(from, to);
}

}  // namespace fednode::cli
