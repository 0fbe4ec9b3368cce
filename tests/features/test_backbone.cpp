// The backbone end to end: `fednode extract` against PyTorch in Python on the bundled MobileNetV2
// (issue 4, acceptance 1), fingerprints, the feature cache, exported torchvision models, and the
// errors bad models and sidecars give. The reference is tests/features/torch_reference.py run by
// Debian's /usr/bin/python3 (python3-torch); tests that need it are skipped, saying so, without it.
#include "core/options.h"
#include "cli/commands.h"
#include "core/torch_library.h"
#include "features/backbone.h"
#include "features/extract.h"
#include "features/feature_cache.h"
#include "features/idx.h"
#include "features/npy.h"

#include "../common/expect_error.h"
#include "../common/temp_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>


#include <atomic>
#include <cstdlib>
#include <functional>
#include <filesystem>
#include <fstream>
#include <iostream>

extern "C" {
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
}

namespace fs = std::filesystem;

namespace fednode {
namespace {

using test::expect_input_error;
using test::TempDir;

const std::string kSource = FEDNODE_SOURCE_DIR;
const std::string kReference = kSource + "/tests/features/torch_reference.py";
const std::string kImages = kSource + "/tests/features/data/images";

bool python_has(const std::string& modules) {
  const std::string cmd = "/usr/bin/python3 -c 'import " + modules + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

bool have_reference() {
  static const bool ok = python_has("torch, numpy");
  return ok;
}

#define REQUIRE_REFERENCE()                                                                     \
  if (!have_reference())                                                                        \
  GTEST_SKIP() << "the PyTorch reference needs /usr/bin/python3 with torch and numpy "          \
                  "(Debian: python3-torch python3-numpy)"

void run_python(const std::string& args) {
  const std::string cmd = "/usr/bin/python3 " + args;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A model path in `dir` that is the bundled model's bytes with a sidecar of our choosing.
std::string model_with_sidecar(const std::string& dir, const std::string& sidecar) {
  const std::string path = dir + "/m.pt";
  fs::remove(path);
  fs::create_symlink(default_backbone_path(), path);
  write_text(path + ".preprocessing", sidecar);
  return path;
}

// Extraction of an image folder without the cache or a progress line, on two threads.
ExtractOptions folder_options(const std::string& model, const std::string& images) {
  ExtractOptions o;
  o.backbone = model;
  o.images_dir = images;
  o.use_cache = false;
  o.progress = false;
  o.threads = 2;
  return o;
}

float max_abs_diff(const MatrixF& a, const MatrixF& b) {
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.cols(), b.cols());
  if (a.rows() != b.rows() || a.cols() != b.cols()) return 1e30f;
  return (a - b).cwiseAbs().maxCoeff();
}

TEST(DefaultBackbone, IsFoundFromTheBuildTree) {
  const std::string path = default_backbone_path();
  EXPECT_TRUE(fs::is_regular_file(path)) << path;
  EXPECT_TRUE(fs::is_regular_file(sidecar_path(path))) << path;
  const Preprocessing p = Preprocessing::load(sidecar_path(path));
  EXPECT_EQ(p.input_size, 224);
  EXPECT_EQ(p.output_dim, 1280);
}

// Acceptance 1: the CLI piece on the default backbone against PyTorch in Python.
TEST(ExtractCommand, MatchesPyTorchOnFashionMnist) {
  REQUIRE_REFERENCE();
  const TempDir dir_tmp("fednode_backbone_fm");
  const std::string dir = dir_tmp.str();
  const int rc = cli::cmd_extract({"--dataset", "fashion-mnist", "--limit", "32", "--input-size", "96",
                                   "--threads", "2", "--batch-size", "12", "--out", dir + "/fm",
                                   "--cache-dir", dir + "/cache", "--quiet"});
  ASSERT_EQ(rc, 0);
  const MatrixF X = read_npy_features(dir + "/fm_X.npy");
  const Labels y = read_npy_labels(dir + "/fm_y.npy");
  ASSERT_EQ(X.rows(), 32);
  ASSERT_EQ(X.cols(), 1280);

  run_python(kReference + " --model " + default_backbone_path() + " --fashion-mnist " +
             default_fashion_mnist_dir() + " --limit 32 --input-size 96 --batch-size 16 --out " + dir +
             "/ref.npy");
  const MatrixF R = read_npy_features(dir + "/ref.npy");
  const float diff = max_abs_diff(X, R);
  std::cout << "[ info ] max |fednode - PyTorch| = " << diff << " (features up to " << R.maxCoeff() << ")\n";
  EXPECT_LT(diff, 1e-4f);
  EXPECT_GT(R.maxCoeff(), 0.1f);  // the comparison is of real activations, not of zeros
  EXPECT_EQ(y, read_npy_labels(dir + "/ref_labels.npy"));

  std::ifstream classes(dir + "/fm_classes.txt");
  std::string line;
  int n = 0;
  while (std::getline(classes, line)) ++n;
  EXPECT_EQ(n, 10);
}

TEST(ExtractCommand, MatchesPyTorchOnImageFolderWithCropBgrAndNormalisation) {
  REQUIRE_REFERENCE();
  if (!python_has("PIL")) GTEST_SKIP() << "the reference decodes images with PIL (Debian: python3-pil)";
  const TempDir dir_tmp("fednode_backbone_folder");
  const std::string dir = dir_tmp.str();
  const std::string model = model_with_sidecar(
      dir, "input_size = 64\nchannel_order = bgr\nfit = center_crop\nmean = 0.4, 0.5, 0.6\nstd = 0.9, 1.1, 1.3\n");
  const Extracted e = extract_features(folder_options(model, kImages));
  ASSERT_EQ(e.features.X.rows(), 5);
  EXPECT_EQ(e.features.y, (Labels{0, 0, 0, 1, 1}));
  EXPECT_EQ(e.class_names, (std::vector<std::string>{"cat", "dog"}));

  run_python(kReference + " --model " + model + " --images " + kImages + " --out " + dir + "/ref.npy");
  const MatrixF R = read_npy_features(dir + "/ref.npy");
  const float diff = max_abs_diff(e.features.X, R);
  std::cout << "[ info ] image folder: max |fednode - PyTorch| = " << diff << "\n";
  EXPECT_LT(diff, 1e-4f);
}

// An image folder as users have them (tests/features/data/make_messy_folder.py): a CMYK JPEG,
// 16-bit, palette, RGBA and grayscale PNGs, progressive and upper-case JPEGs, images in nested
// folders, a truncated JPEG, an empty file and a text file. Without --skip-bad the first bad file
// ends the extraction; with it, the two bad files are left out and named, and every other image
// gives PyTorch's features on PIL's decoding.
TEST(ExtractCommand, ReadsAnImageFolderAsUsersHaveIt) {
  REQUIRE_REFERENCE();
  if (!python_has("PIL")) GTEST_SKIP() << "the folder is written and decoded with PIL (Debian: python3-pil)";
  const TempDir dir_tmp("fednode_messy_folder");
  const std::string dir = dir_tmp.str(), images = dir + "/images";
  run_python(kSource + "/tests/features/data/make_messy_folder.py " + images);
  const std::string model = model_with_sidecar(dir, "input_size = 32\n");
  ExtractOptions o = folder_options(model, images);
  test::expect_input_error([&] { extract_features(o); }, {"--skip-bad"});

  o.skip_bad = true;
  const Extracted e = extract_features(o);
  ASSERT_EQ(e.skipped.size(), 2u);
  EXPECT_EQ(e.skipped[0].file, "pear/empty.png");
  EXPECT_NE(e.skipped[0].reason.find("empty file"), std::string::npos) << e.skipped[0].reason;
  EXPECT_EQ(e.skipped[1].file, "pear/truncated.jpg");
  EXPECT_NE(e.skipped[1].reason.find("truncated"), std::string::npos) << e.skipped[1].reason;
  EXPECT_EQ(e.ignored, (std::vector<std::string>{"pear/notes.txt"}));
  EXPECT_EQ(e.class_names, (std::vector<std::string>{"apple", "pear"}));
  EXPECT_EQ(e.features.y, (Labels{0, 0, 0, 0, 0, 0, 0, 1, 1, 1}));

  run_python(kReference + " --model " + model + " --images " + images + " --skip-bad --out " + dir + "/ref.npy");
  const MatrixF R = read_npy_features(dir + "/ref.npy");
  const float diff = max_abs_diff(e.features.X, R);
  std::cout << "[ info ] messy image folder: max |fednode - PyTorch| = " << diff << "\n";
  EXPECT_LT(diff, 1e-3f);
}

TEST(ExtractCommand, RejectsBadUsage) {
  EXPECT_EQ(cli::cmd_extract({"--help"}), 0);
  EXPECT_THROW(cli::cmd_extract({"--dataset", "fashion-mnist"}), UsageError);  // no --out
  EXPECT_THROW(cli::cmd_extract({"--out", "x"}), UsageError);                  // no input
  EXPECT_THROW(cli::cmd_extract({"--dataset", "fashion-mnist", "--images", kImages, "--out", "x"}),
               UsageError);
  EXPECT_THROW(cli::cmd_extract({"--dataset", "mnist", "--out", "x"}), UsageError);
  EXPECT_THROW(cli::cmd_extract({"--dataset", "fashion-mnist", "--split", "val", "--out", "x"}), UsageError);
  EXPECT_THROW(cli::cmd_extract({"--dataset", "fashion-mnist", "--limit", "0", "--out", "x"}), UsageError);
  EXPECT_THROW(cli::cmd_extract({"--images", kImages, "--split", "test", "--out", "x"}), UsageError);
  EXPECT_THROW(cli::cmd_extract({"--dataset", "fashion-mnist", "--input-size", "4", "--out", "x"}),
               UsageError);
  EXPECT_THROW(cli::cmd_extract({"--dataset", "fashion-mnist", "--out", "x", "--bogus", "1"}), UsageError);
  // An output that cannot be written is refused before the (long) extraction: --no-cache and the
  // whole training split would take minutes otherwise.
  test::expect_input_error(
      [] { cli::cmd_extract({"--dataset", "fashion-mnist", "--no-cache", "--quiet", "--out", "/nonexistent/dir/x"}); },
      {"--out /nonexistent/dir/x_X.npy", "'/nonexistent/dir' does not exist"});
}

TEST(Backbone, FingerprintCoversModelBytesAndPreprocessing) {
  const std::string model = default_backbone_path();
  const Preprocessing p = Preprocessing::load(sidecar_path(model));
  const std::string base = backbone_fingerprint(model, p);
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base, backbone_fingerprint(model, p));

  Preprocessing q = p;
  q.input_size = 96;
  EXPECT_NE(backbone_fingerprint(model, q), base);
  q = p;
  q.mean = {0.5f, 0.5f, 0.5f};
  q.std = {0.5f, 0.5f, 0.5f};
  EXPECT_NE(backbone_fingerprint(model, q), base);
  q = p;
  q.channel_order = ChannelOrder::Bgr;
  EXPECT_NE(backbone_fingerprint(model, q), base);
  q = p;
  q.output_dim = 0;  // a check, not a change of features
  EXPECT_EQ(backbone_fingerprint(model, q), base);

  const TempDir dir_tmp("fednode_backbone_fingerprint");
  const std::string dir = dir_tmp.str();
  fs::copy_file(model, dir + "/copy.pt");
  EXPECT_EQ(backbone_fingerprint(dir + "/copy.pt", p), base);  // bytes, not the path, count
  {
    std::ofstream append(dir + "/copy.pt", std::ios::binary | std::ios::app);
    append << '\0';
  }
  EXPECT_NE(backbone_fingerprint(dir + "/copy.pt", p), base);

  BackboneOptions bo;
  bo.threads = 2;
  Preprocessing small = p;
  small.input_size = 64;
  const Backbone b = Backbone::load(model, small, bo);
  EXPECT_EQ(b.fingerprint(), backbone_fingerprint(model, small));
  EXPECT_EQ(b.output_dim(), 1280);
  EXPECT_EQ(b.threads(), 2);
}

// The bundled MobileNetV2's preprocessing at a small input size, for tests that only run it.
Preprocessing bundled_preprocessing(int input_size) {
  Preprocessing p = Preprocessing::load(sidecar_path(default_backbone_path()));
  p.input_size = input_size;
  return p;
}

// Extraction sets LibTorch's and OpenBLAS's thread counts for its own run and gives both back:
// head training and the FedCGS products after it in the same process keep the caller's.
TEST(Backbone, ThreadCountsAreTheCallersAgainAfterARun) {
  const std::string model = default_backbone_path();
  const Preprocessing p = bundled_preprocessing(32);
  BackboneOptions bo;
  bo.threads = 2;
  const int torch_saved = torch_threads(), blas_saved = openblas_get_num_threads();
  set_torch_threads(1);
  openblas_set_num_threads(1);
  const Backbone b = Backbone::load(model, p, bo);
  std::vector<float> batch(2 * 3 * 32 * 32, 0.5f);
  EXPECT_EQ(b.forward(batch.data(), 2).rows(), 2);
  EXPECT_EQ(torch_threads(), 1);
  EXPECT_EQ(openblas_get_num_threads(), 1);
  set_torch_threads(torch_saved);
  openblas_set_num_threads(blas_saved);
}

TEST(Backbone, AsLoadedFrozenAndOptimisedModulesAgree) {
  const std::string model = default_backbone_path();
  const Preprocessing p = bundled_preprocessing(64);
  BackboneOptions as_loaded;
  as_loaded.threads = 2;
  as_loaded.freeze = false;
  BackboneOptions frozen = as_loaded;
  frozen.freeze = true;
  BackboneOptions optimised = frozen;
  optimised.optimize = true;
  std::vector<float> batch(4 * 3 * 64 * 64);
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f;
  const MatrixF a = Backbone::load(model, p, as_loaded).forward(batch.data(), 4);
  const MatrixF b = Backbone::load(model, p, frozen).forward(batch.data(), 4);
  const MatrixF c = Backbone::load(model, p, optimised).forward(batch.data(), 4);
  EXPECT_LT(max_abs_diff(a, b), 1e-5f);
  EXPECT_LT(max_abs_diff(a, c), 1e-4f);
  EXPECT_GT(a.maxCoeff(), 0.1f);
}

// A model file whose largest tensor record was cut short (its zip entry rewritten shorter):
// LibTorch would read past the record's end, so fednode refuses it after loading.
TEST(Backbone, AModelWhoseTensorDataWasCutShortIsRefused) {
  if (!python_has("zipfile")) GTEST_SKIP() << "needs /usr/bin/python3 to rewrite the model's zip archive";
  const TempDir dir_tmp("fednode_backbone_cut");
  const std::string cut = dir_tmp.str() + "/cut.pt";
  run_python("-c \"import zipfile, sys; src = zipfile.ZipFile(sys.argv[1]); "
             "big = max((i for i in src.infolist() if '/data/' in i.filename), key=lambda i: i.file_size).filename; "
             "dst = zipfile.ZipFile(sys.argv[2], 'w'); "
             "[dst.writestr(i, src.read(i.filename)[: i.file_size // 2] if i.filename == big else src.read(i.filename)) "
             "for i in src.infolist()]; dst.close()\" " +
             default_backbone_path() + " " + cut);
  fs::copy_file(default_backbone_path() + ".preprocessing", cut + ".preprocessing");
  expect_input_error([&] { Backbone::load(cut); }, {"cut.pt", "damaged or truncated"});
}

TEST(Backbone, RejectsBadModelsAndSidecarsClearly) {
  const TempDir dir_tmp("fednode_backbone_bad");
  const std::string dir = dir_tmp.str();
  const std::string good_sidecar = "input_size = 64\n";

  write_text(dir + "/garbage.pt", "this is not a zip archive");
  write_text(dir + "/garbage.pt.preprocessing", good_sidecar);
  expect_input_error([&] { Backbone::load(dir + "/garbage.pt"); },
                     {dir + "/garbage.pt", "not a TorchScript module"});

  expect_input_error([&] { Backbone::load(dir + "/absent.pt"); }, {"absent.pt", "no such backbone model file"});

  fs::create_symlink(default_backbone_path(), dir + "/nosidecar.pt");
  expect_input_error([&] { Backbone::load(dir + "/nosidecar.pt"); }, {"nosidecar.pt.preprocessing", "missing"});
  ASSERT_EQ(::mkfifo((dir + "/nosidecar.pt.preprocessing").c_str(), 0600), 0);
  expect_input_error([&] { Backbone::load(dir + "/nosidecar.pt"); }, {"nosidecar.pt.preprocessing", "not a regular file"});
  fs::remove(dir + "/nosidecar.pt.preprocessing");

  const std::string bad = model_with_sidecar(dir, "input_size = 64\nnormalize = yes\n");
  expect_input_error([&] { Backbone::load(bad); }, {"m.pt.preprocessing:2", "unknown key 'normalize'"});

  const std::string wrong_dim = model_with_sidecar(dir, "input_size = 64\noutput_dim = 1000\n");
  expect_input_error([&] { Backbone::load(wrong_dim); },
                     {"1280-dimensional features", "output_dim = 1000"});

  const std::string one_channel = model_with_sidecar(dir, "input_size = 64\nchannels = 1\n");
  expect_input_error([&] { Backbone::load(one_channel); }, {"failed on a batch of shape 2x1x64x64"});

  // extract_features reports the same problems before touching any data.
  ExtractOptions o;
  o.backbone = dir + "/garbage.pt";
  o.dataset = "fashion-mnist";
  o.limit = 4;
  o.use_cache = false;
  o.progress = false;
  expect_input_error([&] { extract_features(o); }, {"not a TorchScript module"});
  o.backbone = dir + "/nosidecar.pt";
  expect_input_error([&] { extract_features(o); }, {"nosidecar.pt.preprocessing", "missing"});
}

TEST(Backbone, RejectsModulesThatDoNotReturnAFeatureMatrix) {
  REQUIRE_REFERENCE();
  const TempDir dir_tmp("fednode_backbone_shapes");
  const std::string dir = dir_tmp.str();
  const std::string script = dir + "/make.py";
  write_text(script,
             "import torch, sys\n"
             "class Tuple(torch.nn.Module):\n"
             "    def forward(self, x):\n"
             "        return x.mean((2, 3)), x.amax((2, 3))\n"
             "class Map(torch.nn.Module):\n"
             "    def forward(self, x):\n"
             "        return x[:, :, :4, :4]\n"
             "class Ints(torch.nn.Module):\n"
             "    def forward(self, x):\n"
             "        return x.mean((2, 3)).long()\n"
             "class Pooled(torch.nn.Module):\n"
             "    def forward(self, x):\n"
             "        return torch.nn.functional.adaptive_avg_pool2d(x, 1)\n"
             "for cls in (Tuple, Map, Ints, Pooled):\n"
             "    torch.jit.script(cls()).save(sys.argv[1] + '/' + cls.__name__ + '.pt')\n"
             "    open(sys.argv[1] + '/' + cls.__name__ + '.pt.preprocessing', 'w').write('input_size = 16\\n')\n");
  run_python(script + " " + dir);
  expect_input_error([&] { Backbone::load(dir + "/Tuple.pt"); }, {"returns a Tuple", "[N, D]"});
  expect_input_error([&] { Backbone::load(dir + "/Map.pt"); }, {"returns shape [2, 3, 4, 4]"});
  expect_input_error([&] { Backbone::load(dir + "/Ints.pt"); }, {"returns Long features", "real floating-point"});
  // [N, D, 1, 1] (pooling without flatten) is accepted as [N, D].
  const Backbone pooled = Backbone::load(dir + "/Pooled.pt");
  EXPECT_EQ(pooled.output_dim(), 3);
}

TEST(FeatureCacheStore, RoundTripsAndReportsDamage) {
  const TempDir dir_tmp("fednode_backbone_cache_unit");
  const std::string dir = dir_tmp.str();
  const FeatureCache cache(dir);
  Features f;
  f.num_classes = 3;
  f.X = MatrixF::Random(7, 5);
  f.y = {0, 1, 2, 0, 1, 2, 0};
  const CacheKey key{"fp-a", "dataset one\nfile sizes...\n", "test data"};
  EXPECT_FALSE(cache.load(key).has_value());
  cache.store(key, f);
  auto back = cache.load(key);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->X, f.X);
  EXPECT_EQ(back->y, f.y);
  EXPECT_EQ(back->num_classes, 3);

  EXPECT_FALSE(cache.load({"fp-b", key.dataset_identity, ""}).has_value());
  EXPECT_FALSE(cache.load({key.fingerprint, "dataset two", ""}).has_value());
  EXPECT_NE(cache.entry_path({"fp-b", key.dataset_identity, ""}), cache.entry_path(key));

  const std::string y_path = cache.entry_path(key) + "/y.npy";
  fs::resize_file(y_path, fs::file_size(y_path) - 4);
  std::string problem;
  EXPECT_FALSE(cache.load(key, &problem).has_value());
  EXPECT_NE(problem.find("y.npy does not match its checksum"), std::string::npos) << problem;

  cache.store(key, f);  // replaces the damaged entry
  ASSERT_TRUE(cache.load(key).has_value());
  fs::remove(cache.entry_path(key) + "/meta.txt");
  problem.clear();
  EXPECT_FALSE(cache.load(key, &problem).has_value());
  EXPECT_NE(problem.find("meta.txt missing"), std::string::npos) << problem;
}

TEST(FeatureCacheExtract, AStopFlagEndsExtractionAndCachesNothing) {
  const TempDir dir_tmp("fednode_backbone_stop");
  ExtractOptions o;
  o.dataset = "fashion-mnist";
  o.limit = 8;
  o.input_size = 64;
  o.threads = 1;
  o.cache_dir = dir_tmp.str();
  o.progress = false;
  std::atomic<bool> stop{true};
  o.stop = &stop;
  EXPECT_THROW(extract_features(o), Interrupted);
  for (const auto& entry : fs::recursive_directory_iterator(dir_tmp.path()))
    EXPECT_FALSE(entry.is_regular_file()) << entry.path();
  stop = false;
  const Extracted e = extract_features(o);
  EXPECT_FALSE(e.from_cache);
  EXPECT_EQ(e.features.size(), 8);
  EXPECT_TRUE(fs::is_regular_file(e.cache_entry + "/X.npy"));
}

TEST(FeatureCacheExtract, SecondRunLoadsAndDamagedEntriesAreRecomputed) {
  const TempDir dir_tmp("fednode_backbone_cache");
  const std::string dir = dir_tmp.str();
  ExtractOptions o;
  o.dataset = "fashion-mnist";
  o.limit = 8;
  o.input_size = 64;
  o.threads = 2;
  o.cache_dir = dir;
  o.progress = false;

  const Extracted first = extract_features(o);
  EXPECT_FALSE(first.from_cache);
  ASSERT_FALSE(first.cache_entry.empty());
  EXPECT_TRUE(fs::is_regular_file(first.cache_entry + "/X.npy"));

  const Extracted second = extract_features(o);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.features.X, first.features.X);
  EXPECT_EQ(second.features.y, first.features.y);
  EXPECT_EQ(second.fingerprint, first.fingerprint);
  EXPECT_EQ(second.cache_entry, first.cache_entry);

  // Flip one feature byte: still a valid .npy, so only the checksum can catch it.
  {
    std::fstream x(first.cache_entry + "/X.npy", std::ios::in | std::ios::out | std::ios::binary);
    x.seekp(-3, std::ios::end);
    x.put('\x7f');
  }
  const Extracted third = extract_features(o);
  EXPECT_FALSE(third.from_cache);
  EXPECT_EQ(third.features.X, first.features.X);
  EXPECT_TRUE(extract_features(o).from_cache);  // the recomputed entry is stored again

  // Other data, other preprocessing: other entries.
  ExtractOptions more = o;
  more.limit = 9;
  EXPECT_FALSE(extract_features(more).from_cache);
  ExtractOptions bigger = o;
  bigger.input_size = 96;
  const Extracted b = extract_features(bigger);
  EXPECT_FALSE(b.from_cache);
  EXPECT_NE(b.fingerprint, first.fingerprint);

  // optimize_for_inference moves features by float rounding: it does not share frozen entries.
  ExtractOptions optimised = o;
  optimised.optimize = true;
  const Extracted opt = extract_features(optimised);
  EXPECT_FALSE(opt.from_cache);
  EXPECT_NE(opt.cache_entry, first.cache_entry);

  // Without the cache nothing is read or written.
  ExtractOptions none = o;
  none.use_cache = false;
  none.cache_dir = dir + "/unused";
  const Extracted n = extract_features(none);
  EXPECT_FALSE(n.from_cache);
  EXPECT_TRUE(n.cache_entry.empty());
  EXPECT_FALSE(fs::exists(dir + "/unused"));
}

// Section 4: what scripts/export_backbone.py writes with this machine's PyTorch loads in fednode
// and gives PyTorch's features.
TEST(ExportScript, TorchvisionModelWithRandomWeightsLoadsAndMatchesPyTorch) {
  REQUIRE_REFERENCE();
  if (!python_has("torchvision"))
    GTEST_SKIP() << "torchvision is not installed for /usr/bin/python3 (Debian: python3-torchvision)";
  const TempDir dir_tmp("fednode_backbone_export");
  const std::string dir = dir_tmp.str();
  run_python(kSource + "/scripts/export_backbone.py --torchvision resnet18 --weights none --input-size 64 --out " +
             dir + "/r18.pt > /dev/null");
  ExtractOptions o;
  o.backbone = dir + "/r18.pt";
  o.dataset = "fashion-mnist";
  o.limit = 16;
  o.use_cache = false;
  o.progress = false;
  o.threads = 2;
  const Extracted e = extract_features(o);
  ASSERT_EQ(e.features.X.cols(), 512);
  run_python(kReference + " --model " + dir + "/r18.pt --fashion-mnist " + default_fashion_mnist_dir() +
             " --limit 16 --out " + dir + "/ref.npy");
  const MatrixF R = read_npy_features(dir + "/ref.npy");
  const float diff = max_abs_diff(e.features.X, R);
  const float scale = R.cwiseAbs().maxCoeff();
  std::cout << "[ info ] exported resnet18: max |fednode - PyTorch| = " << diff << " (features up to " << scale
            << ")\n";
  EXPECT_LT(diff, 1e-4f * std::max(1.0f, scale));
}

}  // namespace
}  // namespace fednode
