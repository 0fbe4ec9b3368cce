// FedMITR's ViT (methods/fedmitr/vit.h) against the same ViT in PyTorch in Python (bench/ref_vit.py),
// in the same run, on the same images, with the same thread count; the two sides take turns, so
// that background load hits both alike (issue 23, acceptance 4). Client training: images/s over
// --epochs of SGD (momentum 0.9, weight decay 1e-4, batch 64) from a fresh model; forward: images/s
// of a no-grad pass (logits and CLS attention) in batches of 256; inversion: images/s of the
// receiver's sparse inversion (--invert-images from noise, --iterations Adam steps against an
// ensemble of --ensemble models with a student, masking at a quarter, half and three quarters).
//
//   bench_vit [--n 4096] [--epochs 1] [--threads 1] [--reps 3] [--seed 1]
//             [--ensemble 5] [--invert-images 256] [--iterations 20]
//             [--python /usr/bin/python3] [--script bench/ref_vit.py]
//
// fednode is timed around vit_train() / vit_forward() as a node calls them (tensor copies and the
// parameters copied back out included); PyTorch around its loop alone.
#include "core/rng.h"
#include "core/torch_library.h"
#include "features/npy.h"
#include "methods/fedmitr/vit.h"
#include "bench_common.h"
#include "python_peer.h"
#include "../tests/common/temp_dir.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

using namespace fednode;

namespace {

const char* kProgram = "bench_vit";

}  // namespace

int bench_main(int argc, char** argv) {
  int n = 4096, epochs = 1, threads = 1, reps = 3, seed = 1, ensemble = 5, invert_images = 256, iterations = 20;
  std::string python = "/usr/bin/python3", script = std::string(FEDNODE_SOURCE_DIR) + "/bench/ref_vit.py";
  if (bench::wants_help(argc, argv)) {
    std::printf("usage: %s [--n 4096] [--epochs 1] [--threads 1] [--reps 3] [--seed 1] [--ensemble 5]\n"
                "       [--invert-images 256] [--iterations 20] [--python PATH] [--script PATH]\n",
                kProgram);
    return 0;
  }
  if (!bench::parse_flags(kProgram, argc, argv,
                          {{"--n", &n}, {"--epochs", &epochs}, {"--threads", &threads}, {"--reps", &reps}, {"--seed", &seed},
                           {"--ensemble", &ensemble}, {"--invert-images", &invert_images}, {"--iterations", &iterations}},
                          {{"--python", &python}, {"--script", &script}}))
    return 2;
  const VitSpec spec;
  Rng rng(static_cast<uint64_t>(seed));
  MatrixF X(n, spec.pixels());
  Labels y(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    y[static_cast<size_t>(i)] = static_cast<int>(rng.below(10));
    for (int k = 0; k < spec.pixels(); ++k) X(i, k) = static_cast<float>(rng.uniform());
  }
  const test::TempDir tmp(kProgram);
  write_npy_features(tmp.str() + "/X.npy", X);
  write_npy_labels(tmp.str() + "/y.npy", y);
  set_torch_threads(threads);
  std::printf("ViT %d x %d, patch %d, dim %d, depth %d, heads %d (%lld parameters); %d images, %d epoch(s), "
              "%d thread(s), %d rounds\n",
              spec.image_size, spec.image_size, spec.patch, spec.dim, spec.depth, spec.heads,
              static_cast<long long>(spec.parameter_count()), n, epochs, threads, reps);
  std::fflush(stdout);
  VitTrainOptions o;
  o.epochs = epochs;
  std::vector<double> train_ours, train_ref, fwd_ours, fwd_ref, inv_ours, inv_ref;
  bench::PythonPeer py({python, script, "--dir", tmp.str(), "--epochs", std::to_string(epochs), "--threads",
                        std::to_string(threads), "--seed", std::to_string(seed), "--ensemble", std::to_string(ensemble),
                        "--invert-images", std::to_string(invert_images), "--iterations", std::to_string(iterations)});
  InversionOptions inversion;
  inversion.mask_at.clear();
  inversion.iterations = iterations;
  for (int at : {iterations / 4, iterations / 2, 3 * iterations / 4})
    if (at >= 1) inversion.mask_at.push_back(at);
  Labels targets(static_cast<size_t>(invert_images));
  for (int i = 0; i < invert_images; ++i) targets[static_cast<size_t>(i)] = i % spec.classes;
  for (int r = 0; r < reps; ++r) {
    o.seed = static_cast<uint64_t>(seed + r);
    const VitModel start = vit_init(spec, o.seed);
    VitModel trained;
    train_ours.push_back(bench::seconds([&] { trained = vit_train(start, X, y, o); }));
    train_ref.push_back(py.request_seconds("train"));
    fwd_ours.push_back(bench::seconds([&] {
      for (int first = 0; first < n; first += 256) vit_forward(trained, X.middleRows(first, std::min(256, n - first)));
    }));
    fwd_ref.push_back(py.request_seconds("forward"));
    std::vector<VitModel> models;
    for (int m = 0; m < ensemble; ++m) models.push_back(vit_init(spec, o.seed * 100 + static_cast<uint64_t>(m)));
    inversion.seed = o.seed;
    inv_ours.push_back(bench::seconds([&] { vit_invert(models, &start, targets, inversion); }));
    inv_ref.push_back(py.request_seconds("invert"));
  }
  const double images = static_cast<double>(n) * epochs;
  const double to = bench::median(train_ours), tr = bench::median(train_ref);
  const double fo = bench::median(fwd_ours), fr = bench::median(fwd_ref);
  std::printf("%-26s %12s %12s %8s\n", "", "fednode", "PyTorch", "ratio");
  std::printf("%-26s %12.0f %12.0f %8.2f\n", "training images/s", images / to, images / tr, tr / to);
  std::printf("%-26s %12.0f %12.0f %8.2f\n", "forward images/s", n / fo, n / fr, fr / fo);
  const double io = bench::median(inv_ours), ir = bench::median(inv_ref);
  std::printf("%-26s %12.1f %12.1f %8.2f   (%d iterations, ensemble of %d and a student)\n", "inverted images/s",
              invert_images / io, invert_images / ir, ir / io, iterations, ensemble);
  std::printf("ratio: PyTorch's time / fednode's (medians); above 1, fednode is faster\n");
  return 0;
}

int main(int argc, char** argv) {
  return fednode::bench::guarded(kProgram, [&] { return bench_main(argc, argv); });
}
