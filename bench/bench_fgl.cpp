// FGL's two trainings (methods/fgl/) against the same networks in PyTorch in Python
// (bench/ref_fgl.py), in the same run, on the same images, with the same thread count, taking
// turns: the built-in generator (`fednode train-generator --conditioning label`: the DCGAN and its
// discriminator, Adam, whole batches) and the receiver's CNN (SGD with momentum), each for
// --epochs epochs from fresh networks. Reported as images per second and PyTorch's time over
// fednode's (issue 51, goal 4).
//
//   bench_fgl [--n 4096] [--epochs 1] [--threads 1] [--reps 3] [--seed 1]
//             [--python /usr/bin/python3] [--script bench/ref_fgl.py]
//
// fednode is timed around train_generator() / train_cnn() as a node calls them (the images'
// copies into tensors and the module's serialisation included), under the fednode executable's
// malloc policy; PyTorch around its loop alone.
#include "core/rng.h"
#include "core/torch_library.h"
#include "features/allocator.h"
#include "features/npy.h"
#include "methods/fgl/cnn.h"
#include "methods/fgl/torch_generator.h"
#include "bench_common.h"
#include "python_peer.h"
#include "../tests/common/temp_dir.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

using namespace fednode;

namespace {

const char* kProgram = "bench_fgl";

}  // namespace

int bench_main(int argc, char** argv) {
  int n = 4096, epochs = 1, threads = 1, reps = 3, seed = 1;
  std::string python = "/usr/bin/python3", script = std::string(FEDNODE_SOURCE_DIR) + "/bench/ref_fgl.py";
  if (bench::wants_help(argc, argv)) {
    std::printf("usage: %s [--n 4096] [--epochs 1] [--threads 1] [--reps 3] [--seed 1] [--python PATH] [--script PATH]\n",
                kProgram);
    return 0;
  }
  if (!bench::parse_flags(kProgram, argc, argv,
                          {{"--n", &n}, {"--epochs", &epochs}, {"--threads", &threads}, {"--reps", &reps}, {"--seed", &seed}},
                          {{"--python", &python}, {"--script", &script}}))
    return 2;
  const CnnSpec spec;  // Fashion-MNIST's geometry: 28 x 28, one channel, ten classes
  Rng rng(static_cast<uint64_t>(seed));
  MatrixF X(n, spec.pixels());
  Labels y(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    y[static_cast<size_t>(i)] = i % spec.classes;  // every class in every run, as a real set has
    for (int k = 0; k < spec.pixels(); ++k) X(i, k) = static_cast<float>(rng.uniform());
  }
  std::vector<std::string> names;
  for (int c = 0; c < spec.classes; ++c) names.push_back("class " + std::to_string(c));
  const test::TempDir tmp(kProgram);
  write_npy_features(tmp.str() + "/X.npy", X);
  write_npy_labels(tmp.str() + "/y.npy", y);
  set_torch_threads(threads);
  // fednode under its executable's malloc policy (features/allocator.h: `fednode train-generator`
  // and a node run so), PyTorch as a Python user runs it.
  reuse_large_allocations();
  GeneratorTrainOptions g;
  g.epochs = epochs;
  CnnTrainOptions c;
  c.epochs = epochs;
  c.min_steps = 0;
  std::printf("%d images of %d x %d, %d epoch(s), %d thread(s), %d rounds; generator: latent %d, width %d, batch %d; "
              "CNN: width %d, hidden %d, batch %d\n",
              n, spec.image_size, spec.image_size, epochs, threads, reps, g.latent, g.width, g.batch_size, spec.width,
              spec.hidden, c.batch_size);
  std::fflush(stdout);
  bench::PythonPeer py({python, script, "--dir", tmp.str(), "--epochs", std::to_string(epochs), "--threads",
                        std::to_string(threads), "--seed", std::to_string(seed), "--latent", std::to_string(g.latent),
                        "--width", std::to_string(g.width), "--batch-size", std::to_string(g.batch_size),
                        "--cnn-width", std::to_string(spec.width), "--cnn-hidden", std::to_string(spec.hidden)});
  if (c.batch_size != g.batch_size) throw std::logic_error("the reference takes one batch size for both networks");
  std::vector<double> gen_ours, gen_ref, cnn_ours, cnn_ref;
  for (int r = 0; r < reps; ++r) {
    g.seed = c.seed = static_cast<uint64_t>(seed + r);
    gen_ours.push_back(bench::seconds([&] { train_generator(X, y, spec.channels, spec.image_size, names, g); }));
    gen_ref.push_back(py.request_seconds("generator"));
    const CnnModel start = cnn_init(spec, c.seed);
    cnn_ours.push_back(bench::seconds([&] { train_cnn(start, X, y, c); }));
    cnn_ref.push_back(py.request_seconds("cnn"));
  }
  const double images = static_cast<double>(n) * epochs;
  const double go = bench::median(gen_ours), gr = bench::median(gen_ref);
  const double co = bench::median(cnn_ours), cr = bench::median(cnn_ref);
  std::printf("%-28s %12s %12s %8s\n", "", "fednode", "PyTorch", "ratio");
  std::printf("%-28s %12.0f %12.0f %8.2f\n", "generator (GAN) images/s", images / go, images / gr, gr / go);
  std::printf("%-28s %12.0f %12.0f %8.2f\n", "CNN training images/s", images / co, images / cr, cr / co);
  std::printf("ratio: PyTorch's time / fednode's (medians); above 1, fednode is faster\n");
  return 0;
}

int main(int argc, char** argv) {
  return fednode::bench::guarded(kProgram, [&] { return bench_main(argc, argv); });
}
