// Head training against PyTorch in Python, in the same run, on the same features, with the same
// recipe, batch (64), number of epochs and thread count; the two sides take turns, so that
// background load hits both alike.
//   --head linear (FedPFT's head, the centralised and local-only baselines): standardised inputs,
//     nn.Linear, softmax cross-entropy, Adam lr 1e-4; 30 epochs by default.
//   --head adapter (FedTC's server): FC(d,1024)-ReLU-normalize-FC(1024,512)-ReLU-normalize-FC(512,C),
//     inputs divided by their RMS value, SGD lr 1e-3 momentum 0.9; 10 epochs by default (a step
//     is ~100x a linear step's work).
//
//   bench_head [--head linear|adapter] [--n 20000] [--n-test 5000] [--d 1280] [--classes 10]
//              [--epochs E] [--batch-size 64] [--threads 2] [--reps 3] [--seed 1]
//              [--python /usr/bin/python3] [--script bench/ref_torch_head.py]
//
// fednode is timed around train_linear_head() / train_adapter_head() as the methods call them
// (standardiser or RMS scale, tensor copies, weights copied back out included); PyTorch around its
// training loop alone (data loaded and scaled before the clock starts): the comparison
// favours the reference.
// The features imitate a backbone's: a 10-class latent mixture in 32 dimensions through a random
// linear map, noise and a ReLU, so that the classes overlap and the accuracies mean something.
#include "features/npy.h"
#include "methods/heads/train.h"
#include "core/rng.h"

#include "bench_common.h"
#include "python_peer.h"
#include "../tests/common/temp_dir.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

using namespace fednode;

namespace {

const char* kProgram = "bench_head";

// Rows 0..n-1 of a dataset whose class centres depend on (classes, d, seed) only, so that a train
// and a test split drawn from different row streams share them.
Features backbone_like(int64_t n, int d, int classes, uint64_t seed, uint64_t rows_stream) {
  const int r = 32;
  Rng model_rng = Rng::stream(seed, Purpose::KMeansInit, 0xBE4D);
  MatrixD centres(classes, r), A(d, r);
  for (int c = 0; c < classes; ++c)
    for (int j = 0; j < r; ++j) centres(c, j) = 0.5 * model_rng.normal();
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < r; ++j) A(i, j) = model_rng.normal() / std::sqrt(static_cast<double>(r));
  Rng rng = Rng::stream(seed, Purpose::KMeansInit, rows_stream);
  Features f;
  f.num_classes = classes;
  f.X.resize(n, d);
  f.y.resize(static_cast<size_t>(n));
  VectorD z(r);
  for (int64_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % classes);
    f.y[static_cast<size_t>(i)] = c;
    for (int j = 0; j < r; ++j) z[j] = centres(c, j) + rng.normal();
    const VectorD x = A * z;
    for (int j = 0; j < d; ++j) f.X(i, j) = static_cast<float>(std::max(0.0, x[j] + 0.5 * rng.normal()));
  }
  return f;
}

double answer_field(const std::string& line, const std::string& key) {
  const auto at = line.find(key + " ");
  if (at == std::string::npos) throw std::runtime_error("the Python reference answered '" + line + "'");
  return std::stod(line.substr(at + key.size() + 1));
}

}  // namespace

int bench_main(int argc, char** argv) {
  int n = 20000, n_test = 5000, d = 1280, classes = 10, epochs = 0, batch = 64, threads = 2, reps = 3, seed = 1;
  std::string head_kind = "linear", python = "/usr/bin/python3", script = std::string(FEDNODE_SOURCE_DIR) + "/bench/ref_torch_head.py";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h" || i + 1 >= argc) {
      std::fprintf(stderr,
                   "usage: bench_head [--head linear|adapter] [--n N] [--n-test N] [--d D] [--classes C] [--epochs E] [--batch-size B]\n"
                   "                  [--threads T] [--reps R] [--seed S] [--python PATH] [--script PATH]\n");
      return flag == "--help" || flag == "-h" ? 0 : 2;
    }
    const char* v = argv[++i];
    using bench::parse_int;
    if (flag == "--head") head_kind = v;
    else if (flag == "--n") n = parse_int(kProgram, "--n", v);
    else if (flag == "--n-test") n_test = parse_int(kProgram, "--n-test", v);
    else if (flag == "--d") d = parse_int(kProgram, "--d", v);
    else if (flag == "--classes") classes = parse_int(kProgram, "--classes", v, 2, 1000);
    else if (flag == "--epochs") epochs = parse_int(kProgram, "--epochs", v);
    else if (flag == "--batch-size") batch = parse_int(kProgram, "--batch-size", v);
    else if (flag == "--threads") threads = parse_int(kProgram, "--threads", v, 1, 256);
    else if (flag == "--reps") reps = parse_int(kProgram, "--reps", v);
    else if (flag == "--seed") seed = parse_int(kProgram, "--seed", v, 0);
    else if (flag == "--python") python = v;
    else if (flag == "--script") script = v;
    else {
      std::fprintf(stderr, "%s: unknown option %s (see --help)\n", kProgram, flag.c_str());
      return 2;
    }
  }

  if (head_kind != "linear" && head_kind != "adapter") {
    std::fprintf(stderr, "%s: --head must be linear or adapter, got '%s'\n", kProgram, head_kind.c_str());
    return 2;
  }
  const bool linear = head_kind == "linear";
  if (epochs == 0) epochs = linear ? 30 : 10;

  try {
    const Features train = backbone_like(n, d, classes, static_cast<uint64_t>(seed), 1);
    const Features test = backbone_like(n_test, d, classes, static_cast<uint64_t>(seed), 2);
    // The papers' fixed recipes (linear: Adam lr 1e-4, standardised; adapter: SGD lr 1e-3,
    // momentum 0.9, RMS-scaled), for exactly `epochs` passes, as the reference makes: one
    // training run against one, not the validation choice's several.
    LinearTrainOptions linear_opt;
    AdapterTrainOptions adapter_opt;
    linear_opt.lr = 1e-4;
    adapter_opt.lr = 1e-3;
    linear_opt.epochs = adapter_opt.epochs = epochs;
    linear_opt.batch_size = adapter_opt.batch_size = batch;
    linear_opt.min_steps = adapter_opt.min_steps = 0;
    linear_opt.threads = adapter_opt.threads = threads;
    const double lr = linear ? *linear_opt.lr : *adapter_opt.lr;
    const int64_t steps = static_cast<int64_t>(epochs) * ((n + batch - 1) / batch);

    const test::TempDir tmp("bench_head");  // removed on every exit, errors included
    const std::string dir = tmp.str();
    write_npy_features(dir + "/train_X.npy", train.X);
    write_npy_labels(dir + "/train_y.npy", train.y);
    write_npy_features(dir + "/test_X.npy", test.X);
    write_npy_labels(dir + "/test_y.npy", test.y);

    std::printf("%s head training, n=%d d=%d C=%d, %d epochs (%lld steps), batch %d, %s lr %g, "
                "%d threads, %d rounds\n",
                linear ? "Linear" : "Adapter", n, d, classes, epochs, static_cast<long long>(steps), batch,
                linear ? "Adam" : "SGD", lr, threads, reps);
    std::fflush(stdout);
    std::vector<double> ours, ours_cpu, ref, ref_cpu, ratios;
    double ours_acc = 0, ref_acc = 0;
    {
      bench::PythonPeer py({python, script, "--dir", dir, "--head", head_kind, "--epochs", std::to_string(epochs), "--batch-size",
                            std::to_string(batch), "--lr", std::to_string(lr), "--threads",
                            std::to_string(threads), "--seed", std::to_string(seed)});
      for (int r = 0; r < reps; ++r) {
        linear_opt.seed = adapter_opt.seed = static_cast<uint64_t>(seed + r);
        const double c0 = bench::cpu_seconds();
        std::unique_ptr<Head> head;
        ours.push_back(bench::seconds([&] {
          if (linear) head = train_linear_head(train, linear_opt);
          else head = train_adapter_head(train, adapter_opt);
        }));
        ours_cpu.push_back(bench::cpu_seconds() - c0);
        ours_acc += head->accuracy(test) / reps;
        const std::string answer = py.request("run");
        ref.push_back(answer_field(answer, "seconds"));
        ref_cpu.push_back(answer_field(answer, "cpu"));
        ref_acc += answer_field(answer, "accuracy") / reps;
        ratios.push_back(ref.back() / ours.back());
      }
    }

    const double ratio = bench::median(ref) / bench::median(ours);
    std::printf("%-22s %12s %12s\n", "", "fednode", "PyTorch");
    std::printf("%-22s %12.2f %12.2f\n", "wall s (median)", bench::median(ours), bench::median(ref));
    std::printf("%-22s %12.2f %12.2f\n", "cpu s (median)", bench::median(ours_cpu), bench::median(ref_cpu));
    std::printf("%-22s %12.0f %12.0f\n", "steps/s", steps / bench::median(ours), steps / bench::median(ref));
    std::printf("%-22s %12.4f %12.4f\n", "test accuracy (mean)", ours_acc, ref_acc);
    std::printf("ratio PyTorch / fednode: %.2f (median times); per round %.2f to %.2f\n", ratio,
                *std::min_element(ratios.begin(), ratios.end()), *std::max_element(ratios.begin(), ratios.end()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  return fednode::bench::guarded("bench_head", [&] { return bench_main(argc, argv); });
}
