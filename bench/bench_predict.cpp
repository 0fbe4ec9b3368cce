// What `fednode predict` costs beyond extraction: images per second of Classifier::classify_images
// (backbone, expansion, head, softmax) against Backbone::extract alone, in the same run, on the
// same images (the first N of Fashion-MNIST test), model (the bundled MobileNetV2), input size,
// batch size and threads, the two interleaved run by run. The head is a linear head of the
// backbone's width (or of the expansion's) with fixed weights: its arithmetic is a trained
// head's. Issue 49's target: predict costs at most 5 % more than extract.
//
//   bench_predict [--images N] [--size S] [--threads T] [--batch-size B] [--reps R] [--expansion D]
#include "features/backbone.h"
#include "features/extract.h"
#include "features/idx.h"
#include "features/image_sources.h"
#include "node/classifier.h"

#include "bench_common.h"

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

using namespace fednode;

int main(int argc, char** argv) try {
  int64_t images = 512;
  int size = 64, threads = 2, batch = 32, reps = 5, expansion = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](long lo, long hi) {
      if (i + 1 >= argc) bench::parse_int("bench_predict", argv[i], "", lo, hi);  // exits, naming the flag
      return bench::parse_int("bench_predict", argv[i], argv[++i], lo, hi);
    };
    if (a == "--images") images = value(1, 60000);
    else if (a == "--size") size = static_cast<int>(value(32, 1024));
    else if (a == "--threads") threads = static_cast<int>(value(1, 256));
    else if (a == "--batch-size") batch = static_cast<int>(value(1, 4096));
    else if (a == "--reps") reps = static_cast<int>(value(1, 100));
    else if (a == "--expansion") expansion = static_cast<int>(value(0, 16384));
    else {
      std::cerr << "usage: bench_predict [--images N] [--size S] [--threads T] [--batch-size B] [--reps R] [--expansion D]\n";
      return 2;
    }
  }
  const BackboneFile file = open_backbone_file("", size);
  BackboneOptions bo;
  bo.threads = threads;
  const Backbone backbone = Backbone::load(file.model, file.preprocessing, bo);
  const IdxSource source(read_idx_images(find_idx_file(default_fashion_mnist_dir(), "t10k-images-idx3-ubyte"), images), "test");

  HeadFile head;
  head.card.recipe = backbone_recipe(file.model, file.preprocessing, {expansion, 1});
  head.card.recipe.preprocessing.output_dim = backbone.output_dim();
  const int width = expansion > 0 ? expansion : backbone.output_dim();
  MatrixF W = MatrixF::Zero(10, width);
  for (int c = 0; c < 10; ++c)
    for (int j = 0; j < width; ++j) W(c, j) = static_cast<float>(((c * 131 + j * 31) % 97) - 48) / 480.0f;
  head.head = std::make_shared<LinearHead>("linear", W, VectorF::Zero(10));
  ClassifierOptions co;
  co.threads = threads;
  co.batch_size = batch;
  const Classifier classifier(head, co);

  RunOptions run;
  run.batch_size = batch;
  run.progress = false;
  (void)backbone.extract(source, run);  // warm both: first batches allocate
  (void)classifier.classify_images(source);
  // With an expansion, what a node's data loading does too: extraction, then the expansion.
  const FeatureExpansion e_opts{expansion, 1};
  std::vector<double> extract_s, expanded_s, predict_s;
  for (int r = 0; r < reps; ++r) {
    extract_s.push_back(bench::seconds([&] { (void)backbone.extract(source, run); }));
    if (expansion > 0)
      expanded_s.push_back(bench::seconds([&] {
        Features f;
        f.X = backbone.extract(source, run);
        f.y.assign(static_cast<size_t>(f.X.rows()), 0);
        f.num_classes = 1;
        (void)expand_features(std::move(f), e_opts);
      }));
    predict_s.push_back(bench::seconds([&] { (void)classifier.classify_images(source); }));
  }
  const double e = bench::median(extract_s), p = bench::median(predict_s);
  std::printf("bench_predict: %lld Fashion-MNIST test images at %d px, batch %d, %d threads, head input %d%s, median of %d\n",
              static_cast<long long>(images), size, batch, threads, width, expansion > 0 ? " (expanded)" : "", reps);
  std::printf("%-10s %12s %12s\n", "", "images/s", "seconds");
  std::printf("%-10s %12.1f %12.3f\n", "extract", static_cast<double>(images) / e, e);
  std::printf("%-10s %12.1f %12.3f\n", "predict", static_cast<double>(images) / p, p);
  if (expansion > 0) {
    const double x = bench::median(expanded_s);
    std::printf("%-10s %12.1f %12.3f\n", "+expand", static_cast<double>(images) / x, x);
    std::printf("predict / (extract + expansion) time: %.3f\n", p / x);
  }
  std::printf("predict / extract time: %.3f (target at most 1.05)\n", p / e);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bench_predict: " << e.what() << "\n";
  return 1;
}
