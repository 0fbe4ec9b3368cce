// Feature-extraction throughput of fednode against PyTorch in Python, in the same run, on the same
// model (the bundled MobileNetV2), images (the first N of Fashion-MNIST train), batch size,
// thread count and input size. Both sides are timed over the extraction loop alone, from uint8
// images to a feature matrix: preprocessing (resize, grey to RGB) plus the forward passes; model
// loading is reported separately. Runs alternate between the two so that a busy machine slows both.
//
//   bench_extract [--sizes 224,128,96,64] [--images N] [--threads 2] [--batch-size 32] [--reps 3]
//                 [--model MODEL.pt] [--python /usr/bin/python3]
//
// Columns: fednode as it runs by default (frozen + optimize_for_inference), fednode running the
// module as loaded, PyTorch as a Python user runs it (torch.jit.load, inference_mode), and PyTorch
// with the same freeze + optimize_for_inference. The headline ratio is the first over the third.
#include "features/backbone.h"
#include "features/idx.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using fednode::Backbone;
using fednode::BackboneOptions;
using fednode::Image;
using fednode::ImageView;

class MemorySource : public fednode::ImageSource {
 public:
  explicit MemorySource(const fednode::IdxImages& images) : images_(images) {}
  int64_t size() const override { return images_.count; }
  ImageView image(int64_t i, Image&) const override {
    const size_t per = static_cast<size_t>(images_.rows) * images_.cols;
    return {images_.pixels.data() + static_cast<size_t>(i) * per, images_.rows, images_.cols, 1};
  }
  std::string describe(int64_t i) const override { return "image " + std::to_string(i); }

 private:
  const fednode::IdxImages& images_;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Images per second of one Python run (its own measurement of the extraction loop).
double python_rate(const std::string& python, const std::string& model, int size, int64_t n, int threads,
                   int batch, bool optimize) {
  std::ostringstream cmd;
  cmd << python << " " << FEDNODE_SOURCE_DIR << "/tests/features/torch_reference.py --model " << model
      << " --fashion-mnist " << fednode::default_fashion_mnist_dir() << " --limit " << n << " --input-size "
      << size << " --threads " << threads << " --batch-size " << batch << " --time"
      << (optimize ? " --optimize" : "");
  FILE* p = popen(cmd.str().c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + cmd.str());
  char line[256];
  double rate = -1;
  while (std::fgets(line, sizeof line, p))
    if (std::sscanf(line, "images_per_second %lf", &rate) == 1) break;
  while (std::fgets(line, sizeof line, p)) {
  }
  if (pclose(p) != 0 || rate <= 0) throw std::runtime_error("the Python reference failed: " + cmd.str());
  return rate;
}

std::vector<int> parse_sizes(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes_text = "224,128,96,64", model = fednode::default_backbone_path(), python = "/usr/bin/python3";
  int64_t images = 0;
  int threads = 2, batch = 32, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--sizes") sizes_text = v;
    else if (k == "--images") images = std::stoll(v);
    else if (k == "--threads") threads = std::stoi(v);
    else if (k == "--batch-size") batch = std::stoi(v);
    else if (k == "--reps") reps = std::stoi(v);
    else if (k == "--model") model = v;
    else if (k == "--python") python = v;
    else {
      std::cerr << "bench_extract: unknown option " << k << "\n";
      return 2;
    }
  }
  const std::vector<int> sizes = parse_sizes(sizes_text);
  std::printf("Feature extraction, %s, Fashion-MNIST train, %d threads, batch %d, best of %d\n", model.c_str(),
              threads, batch, reps);
  std::printf("%5s %7s %10s | %12s %12s | %12s %12s | %8s %8s\n", "size", "images", "load s", "fednode/s",
              "fednode-plain", "pytorch/s", "pytorch-opt", "ratio", "plain");

  for (int size : sizes) {
    // About 3 s of work per measurement at 2 threads: enough to average over batches, short
    // enough to repeat.
    const int64_t n = images > 0 ? images : std::max<int64_t>(batch * 2, static_cast<int64_t>(64.0 * 224 * 224 / size / size));
    const std::string dir = fednode::default_fashion_mnist_dir();
    const fednode::IdxImages data = fednode::read_idx_images(
        std::ifstream(dir + "/train-images-idx3-ubyte.gz") ? dir + "/train-images-idx3-ubyte.gz"
                                                           : dir + "/train-images-idx3-ubyte",
        n);
    fednode::Preprocessing pre = fednode::Preprocessing::load(fednode::sidecar_path(model));
    pre.input_size = size;
    BackboneOptions opt;
    opt.threads = threads;
    BackboneOptions plain_opt = opt;
    plain_opt.optimize = false;
    const double t0 = now();
    const Backbone fast = Backbone::load(model, pre, opt);
    const double load_seconds = now() - t0;
    const Backbone plain = Backbone::load(model, pre, plain_opt);
    const MemorySource source(data);
    fednode::RunOptions run;
    run.batch_size = batch;
    run.progress = false;
    fast.extract(source, run);  // warm-up: first-touch allocations and oneDNN primitive caches
    plain.extract(source, run);

    double best_fast = 0, best_plain = 0, best_py = 0, best_py_opt = 0;
    for (int r = 0; r < reps; ++r) {
      double t = now();
      fast.extract(source, run);
      best_fast = std::max(best_fast, static_cast<double>(n) / (now() - t));
      best_py = std::max(best_py, python_rate(python, model, size, n, threads, batch, false));
      t = now();
      plain.extract(source, run);
      best_plain = std::max(best_plain, static_cast<double>(n) / (now() - t));
      best_py_opt = std::max(best_py_opt, python_rate(python, model, size, n, threads, batch, true));
    }
    std::printf("%5d %7lld %10.2f | %12.1f %12.1f | %12.1f %12.1f | %8.2f %8.2f\n", size,
                static_cast<long long>(n), load_seconds, best_fast, best_plain, best_py, best_py_opt,
                best_fast / best_py, best_plain / best_py);
    std::fflush(stdout);
  }
  std::printf("ratio: fednode (default, optimised) / PyTorch (torch.jit.load as is); plain: fednode running the "
              "module as loaded / the same. Target ratio >= 1.0.\n");
  return 0;
}
