// Feature-extraction throughput of fednode against PyTorch in Python, in the same run, on the same
// model (the bundled MobileNetV2), images (the first N of Fashion-MNIST train), batch size,
// thread count and input size. Both sides are timed over the extraction loop alone, from uint8
// images to a feature matrix: preprocessing (resize, grey to RGB) plus the forward passes; model
// loading is reported separately (load s: fednode's load + freeze + probe).
//
//   bench_extract [--sizes 224,128,96,64] [--images N] [--threads 2] [--batch-size 32] [--reps 5]
//                 [--model MODEL.pt] [--python /usr/bin/python3] [--python-allocator default|fednode]
//
// Columns: fednode as it runs by default (torch::jit::freeze), fednode running the module as
// loaded, PyTorch as a Python user runs it (torch.jit.load, inference_mode), and PyTorch with the
// same torch.jit.freeze. The headline ratio is the first over the third; the other two columns
// show where a difference comes from (the C++ pipeline itself, or freezing).
#include "features/allocator.h"
#include "features/backbone.h"
#include "features/idx.h"

#include "bench_common.h"
#include "python_peer.h"

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

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

using fednode::bench::cpu_seconds;
using fednode::bench::PythonPeer;

// Wall seconds and process CPU seconds of one extraction by the Python peer.
std::pair<double, double> timed_run(PythonPeer& peer) {
  const std::string line = peer.request("run");
  double seconds = -1, cpu = -1;
  if (std::sscanf(line.c_str(), "seconds %lf cpu %lf", &seconds, &cpu) != 2 || seconds <= 0)
    throw std::runtime_error("the Python reference answered '" + line + "'");
  return {seconds, cpu};
}
using fednode::bench::median;


}  // namespace

constexpr const char* kUsage =
    "usage: bench_extract [--sizes 224,128,96,64] [--images N (0: about 3 s of work per size)] [--threads 2]\n"
    "                     [--batch-size 32] [--reps 5] [--model MODEL.pt (the bundled MobileNetV2)]\n"
    "                     [--python /usr/bin/python3] [--python-allocator default|fednode]\n";

int run(int argc, char** argv) {
  using fednode::bench::parse_int;
  constexpr const char* kProgram = "bench_extract";
  if (fednode::bench::wants_help(argc, argv)) {
    std::cout << kUsage;
    return 0;
  }
  std::string sizes_text = "224,128,96,64", model = fednode::default_backbone_path(), python = "/usr/bin/python3";
  int64_t images = 0;
  int threads = 2, batch = 32, reps = 5;
  bool same_allocator = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) {
      std::cerr << kProgram << ": " << k << " needs a value\n" << kUsage;
      return 2;
    }
    const char* v = argv[i + 1];
    if (k == "--sizes") sizes_text = v;
    else if (k == "--images") images = parse_int(kProgram, "--images", v, 0, 60000);  // Fashion-MNIST train
    else if (k == "--threads") threads = parse_int(kProgram, "--threads", v, 1, 256);
    else if (k == "--batch-size") batch = parse_int(kProgram, "--batch-size", v, 1, 4096);
    else if (k == "--reps") reps = parse_int(kProgram, "--reps", v, 1, 1000);
    else if (k == "--model") model = v;
    else if (k == "--python") python = v;
    else if (k == "--python-allocator") {
      if (std::string(v) != "default" && std::string(v) != "fednode") {
        std::cerr << kProgram << ": --python-allocator is default or fednode, got '" << v << "'\n";
        return 2;
      }
      same_allocator = std::string(v) == "fednode";
    } else {
      std::cerr << kProgram << ": unknown option " << k << "\n" << kUsage;
      return 2;
    }
  }
  const std::vector<int> sizes = fednode::bench::parse_int_list(kProgram, "--sizes", sizes_text.c_str());
  for (int s : sizes)
    if (s < 32 || s > 2048) {
      std::cerr << kProgram << ": --sizes are input sizes in [32, 2048] (MobileNetV2 needs at least 32), got " << s << "\n";
      return 2;
    }
  // fednode as its executable extracts (features/allocator.h); PyTorch as a Python user runs it,
  // or, with --python-allocator fednode, under the same malloc policy (through GLIBC_TUNABLES).
  fednode::reuse_large_allocations();
  const fednode::BatchAllocations batch_buffers;
  if (same_allocator) ::setenv("GLIBC_TUNABLES", fednode::batch_allocations_tunables(), 1);
  std::printf("Feature extraction, %s, Fashion-MNIST train, %d threads, batch %d, %d rounds, python allocator %s\n",
              model.c_str(), threads, batch, reps, same_allocator ? "as fednode's" : "glibc default");
  std::printf("%5s %7s %8s | %12s %12s | %12s %12s | %6s %6s | %6s | %8s %8s\n", "size", "images", "load s",
              "fednode", "fednode-plain", "pytorch", "pytorch-frozen", "ratio", "min", "plain", "cpu ms", "py cpu");

  for (int size : sizes) {
    // About 3 s of work per measurement at 2 threads: enough to average over batches, short
    // enough to repeat.
    const int64_t wanted = images > 0 ? images : std::max<int64_t>(batch * 2, static_cast<int64_t>(64.0 * 224 * 224 / size / size));
    const std::string dir = fednode::default_fashion_mnist_dir();
    const fednode::IdxImages data =
        fednode::read_idx_images(fednode::find_idx_file(dir, "train-images-idx3-ubyte"), wanted);
    const int64_t n = data.count;  // what the file holds, if fewer: the rates count these
    fednode::Preprocessing pre = fednode::Preprocessing::load(fednode::sidecar_path(model));
    pre.input_size = size;
    BackboneOptions opt;
    opt.threads = threads;
    BackboneOptions plain_opt = opt;
    plain_opt.freeze = false;
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

    auto peer_args = [&](bool freeze) {
      std::vector<std::string> args = {python, std::string(FEDNODE_SOURCE_DIR) + "/tests/features/torch_reference.py",
                                       "--model", model, "--fashion-mnist", dir, "--limit", std::to_string(n),
                                       "--input-size", std::to_string(size), "--threads", std::to_string(threads),
                                       "--batch-size", std::to_string(batch), "--serve"};
      if (freeze) args.push_back("--freeze");
      return args;
    };
    PythonPeer py(peer_args(false)), py_frozen(peer_args(true));

    // Four contenders, measured one after another in each round, the order rotating per round;
    // ratios are taken within a round, where the machine's load was about the same.
    std::vector<double> r_fast, r_plain, r_py, r_py_frozen, ratio, ratio_plain, cpu_fast, cpu_py;
    for (int r = 0; r < reps; ++r) {
      double rate[4] = {0, 0, 0, 0}, cpu[4] = {0, 0, 0, 0};
      for (int k = 0; k < 4; ++k) {
        const int which = (k + r) % 4;
        if (which == 0 || which == 1) {
          const double t = now(), c = cpu_seconds();
          (which == 0 ? fast : plain).extract(source, run);
          rate[which] = static_cast<double>(n) / (now() - t);
          cpu[which] = cpu_seconds() - c;
        } else {
          const auto [wall, cpu_s] = timed_run(which == 2 ? py : py_frozen);
          rate[which] = static_cast<double>(n) / wall;
          cpu[which] = cpu_s;
        }
      }
      r_fast.push_back(rate[0]);
      r_plain.push_back(rate[1]);
      r_py.push_back(rate[2]);
      r_py_frozen.push_back(rate[3]);
      ratio.push_back(rate[0] / rate[2]);
      ratio_plain.push_back(rate[1] / rate[2]);
      cpu_fast.push_back(1000.0 * cpu[0] / static_cast<double>(n));
      cpu_py.push_back(1000.0 * cpu[2] / static_cast<double>(n));
    }
    std::printf("%5d %7lld %8.2f | %12.1f %12.1f | %12.1f %12.1f | %6.2f %6.2f | %6.2f | %8.1f %8.1f\n", size,
                static_cast<long long>(n), load_seconds, median(r_fast), median(r_plain), median(r_py),
                median(r_py_frozen), median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                median(ratio_plain), median(cpu_fast), median(cpu_py));
    std::fflush(stdout);
  }
  std::printf("images/s, medians over rounds. ratio: fednode as it runs by default (frozen) / PyTorch "
              "(torch.jit.load as is), median and minimum over rounds; plain: "
              "fednode running the module as loaded / the same PyTorch; cpu ms: process CPU milliseconds per image of "
              "fednode (default) and PyTorch (as is), which a busy machine distorts less than wall time. "
              "Target ratio >= 1.0.\n");
  return 0;
}

int main(int argc, char** argv) { return fednode::bench::guarded("bench_extract", [&] { return run(argc, argv); }); }
