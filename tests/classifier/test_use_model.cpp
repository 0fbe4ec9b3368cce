// Using what a federation learnt (issue 49's acceptance): `fednode predict` on a node's state gives
// the accuracy its result.json reports; `fednode export` writes a module that Debian's PyTorch loads
// and that gives predict's logits; every head kind does both; damaged or foreign head files are
// refused with exit 1. Real processes throughout: nodes, the CLI, python3 with torch.jit.load.
#include "../network/federation.h"
#include "features/backbone.h"
#include "features/idx.h"
#include "node/head_io.h"

#include <cmath>
#include <regex>

namespace fednode::testing_network {
namespace {

const std::string kCheck = std::string(FEDNODE_SOURCE_DIR) + "/tests/classifier/check_export.py";

OptionMap small_data() {
  return {{"dataset", "fashion-mnist"}, {"train-limit", "3000"}, {"test-limit", "1000"},
          {"partition", "dirichlet"},   {"dirichlet-alpha", "0.5"}, {"min-samples", "20"}};
}

struct Prediction {
  CliRun run;
  long correct = -1, samples = -1;
};

// predict with the head `head_args` names on `data_args`, its logits written to `csv`; the
// accuracy read from the summary line "accuracy 0.8140 (814 of 1000)".
Prediction predict(const std::string& head_args, const std::string& data_args, const fs::path& csv) {
  Prediction p;
  p.run = run_cli("predict " + head_args + " " + data_args + " --logits --quiet --out " + csv.string());
  std::smatch m;
  if (std::regex_search(p.run.output, m, std::regex("accuracy [0-9.]+ \\(([0-9]+) of ([0-9]+)\\)"))) {
    p.correct = std::stol(m[1]);
    p.samples = std::stol(m[2]);
  }
  return p;
}

struct ExportCheck {
  CliRun run;
  long rows = -1, classes = -1;
  double max_diff = -1, max_logit = -1;
  bool argmax_equal = false;
};

// `fednode export` of the head, then the module in PyTorch on the same data as `csv`'s predictions.
ExportCheck export_and_check(const std::string& head_args, const fs::path& model, const fs::path& csv,
                             const std::string& python_data) {
  ExportCheck c;
  c.run = run_cli("export " + head_args + " --out " + model.string());
  if (c.run.code != 0) return c;
  const std::string cmd = "/usr/bin/python3 " + kCheck + " " + model.string() + " " + csv.string() + " " + python_data + " 2>&1";
  c.run.output.clear();
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) c.run.output.append(buf, n);
  c.run.code = p ? WEXITSTATUS(pclose(p)) : -1;
  std::smatch m;
  if (std::regex_search(c.run.output, m,
                        std::regex("rows ([0-9]+) max_abs_diff (\\S+) max_abs_logit (\\S+) argmax_equal ([01]) sidecar_classes ([0-9]+)"))) {
    c.rows = std::stol(m[1]);
    c.max_diff = std::stod(m[2]);
    c.max_logit = std::stod(m[3]);
    c.argmax_equal = m[4] == "1";
    c.classes = std::stol(m[5]);
  }
  return c;
}

std::string fashion_mnist_for_python(long limit) {
  return "--fashion-mnist " + default_fashion_mnist_dir() + " --split test --limit " + std::to_string(limit);
}

// Within `tolerance` of predict's logits, relative to the largest logit where that exceeds 1: an
// LDA head on pixels scores in the thousands (its weights invert a nearly singular covariance),
// where float32 itself resolves only about 1e-3.
void expect_export_agrees(const ExportCheck& c, long rows, double tolerance) {
  ASSERT_EQ(c.run.code, 0) << c.run.output;
  EXPECT_EQ(c.rows, rows) << c.run.output;
  EXPECT_TRUE(c.argmax_equal) << c.run.output;
  EXPECT_LT(c.max_diff, tolerance * std::max(1.0, c.max_logit)) << c.run.output;
  EXPECT_EQ(c.classes, 10) << c.run.output;
}

// Acceptance 1 and 2: the demo's chain (FedPFT on Fashion-MNIST pixels), small. Ports 24300-24302.
TEST(UseTheModel, AChainNodesHeadPredictsItsResultsAccuracyAndItsExportAgreesInPyTorch) {
  const fs::path dir = test_dir("use_model");
  const Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedpft", 24300,
                                       {{"components", "2"}, {"covariance", "diag"}, {"head-epochs", "2"}, {"head-min-steps", "150"}},
                                       small_data());
  const CliRun launch = run_cli("launch " + f.file.string() + " --quiet --timeout 300");
  ASSERT_EQ(launch.code, 0) << launch.output;
  const NodeOutcome last = read_result(f.state_dir(2));
  ASSERT_GT(last.accuracy, 0.1);

  const Prediction p = predict("--state " + f.state_dir(2).string(), "--dataset fashion-mnist --limit 1000", dir / "p.csv");
  ASSERT_EQ(p.run.code, 0) << p.run.output;
  EXPECT_EQ(p.samples, 1000);
  EXPECT_EQ(p.correct, std::lround(last.accuracy * 1000)) << p.run.output;
  EXPECT_DOUBLE_EQ(static_cast<double>(p.correct) / 1000.0, last.accuracy);
  // The same head reached through the topology file, by the node's name.
  const Prediction by_name = predict("--topology " + f.file.string() + " --id n2", "--dataset fashion-mnist --limit 1000", dir / "q.csv");
  EXPECT_EQ(by_name.correct, p.correct) << by_name.run.output;

  // The page of per-class accuracy and confusion carries the exact accuracy.
  const CliRun html = run_cli("predict --state " + f.state_dir(2).string() + " --dataset fashion-mnist --limit 1000 --quiet"
                              " --out " + (dir / "h.csv").string() + " --html " + (dir / "html").string());
  ASSERT_EQ(html.code, 0) << html.output;
  std::smatch m;
  const std::string page = read_text(dir / "html" / "index.html");
  ASSERT_TRUE(std::regex_search(page, m, std::regex("id=\"accuracy\" data-value=\"([0-9.eE+-]+)\"")));
  EXPECT_DOUBLE_EQ(std::stod(m[1]), last.accuracy);
  EXPECT_NE(page.find("id=\"confusion-9-9\""), std::string::npos);

  const CliRun info = run_cli("head info " + (f.state_dir(2) / "head").string() + " --format json");
  ASSERT_EQ(info.code, 0) << info.output;
  const nlohmann::json card = test::parse_json(info.output, "head info");
  EXPECT_EQ(string_or(field(card, "method")), "fedpft");
  EXPECT_EQ(int_list(field(card, "contributors")), (std::vector<long>{0, 1, 2}));
  EXPECT_EQ(string_or(field(card, "features")), "pixels");
  EXPECT_EQ(string_or(test::element(field(card, "class_names"), 9)), "Ankle boot");

  expect_export_agrees(export_and_check("--state " + f.state_dir(2).string(), dir / "n2.pt", dir / "p.csv",
                                        fashion_mnist_for_python(1000)),
                       1000, 1e-4);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

struct HeadKind {
  const char* name;
  std::string simulate;  // method and options
  const char* kind;      // what head info says
  double tolerance;      // on the logits (expect_export_agrees)
};

class EveryHeadKind : public ::testing::TestWithParam<HeadKind> {};

// Acceptance 3: FedTC's adapter, FedCGS's LDA head and personal head, FGL's CNN, FedMITR's ViT and
// ensemble of ViTs (both rules), and a linear head through a backbone and a feature expansion:
// simulate saves them, predict gives the report's accuracy, the export gives predict's logits in
// PyTorch.
TEST_P(EveryHeadKind, PredictsTheSimulatedAccuracyAndExportsToPyTorch) {
  const HeadKind& k = GetParam();
  const fs::path dir = test_dir("use_model");
  fs::create_directories(dir);
  std::string extra;
  if (std::string(k.name) == "fgl") {
    const CliRun gen = run_cli("train-generator --dataset fashion-mnist --from 59000 --to 60000 --epochs 1 --width 8"
                               " --latent 8 --seed 2 --quiet --out " + (dir / "gen.pt").string());
    ASSERT_EQ(gen.code, 0) << gen.output;
    extra = " --generator " + (dir / "gen.pt").string();
  }
  const CliRun sim = run_cli("simulate " + k.simulate + extra + " --dataset fashion-mnist --train-limit 900 --test-limit 300"
                             " --topology star --nodes 3 --no-baselines --quiet --seed 4 --report " + (dir / "r.json").string() +
                             " --save-heads " + (dir / "heads").string());
  ASSERT_EQ(sim.code, 0) << sim.output;
  const std::vector<NodeOutcome> report = read_report(dir / "r.json");
  ASSERT_EQ(report.size(), 3u);
  const fs::path head = dir / "heads" / "n1.head";
  const CliRun info = run_cli("head info " + head.string());
  EXPECT_NE(info.output.find(std::string("kind: ") + k.kind), std::string::npos) << info.output;

  const Prediction p = predict("--head " + head.string(), "--dataset fashion-mnist --limit 300", dir / "p.csv");
  ASSERT_EQ(p.run.code, 0) << p.run.output;
  EXPECT_EQ(p.correct, std::lround(report[1].accuracy * 300)) << p.run.output;
  const ExportCheck c = export_and_check("--head " + head.string(), dir / "m.pt", dir / "p.csv", fashion_mnist_for_python(300));
  expect_export_agrees(c, 300, k.tolerance);

  // Through a backbone, the features `extract` writes classify as the images do (the same
  // features, from the feature cache), and a --head-only export takes them.
  if (std::string(k.name) == "backbone") {
    const std::string prefix = (dir / "ex").string();
    const CliRun ex = run_cli("extract --dataset fashion-mnist --split test --limit 300 --input-size 32 --quiet --out " + prefix);
    ASSERT_EQ(ex.code, 0) << ex.output;
    const Prediction f = predict("--head " + head.string(), "--features " + prefix + "_X.npy --labels " + prefix + "_y.npy",
                                 dir / "f.csv");
    ASSERT_EQ(f.run.code, 0) << f.run.output;
    EXPECT_EQ(f.correct, p.correct) << f.run.output;
    const ExportCheck h = export_and_check("--head-only --head " + head.string(), dir / "h.pt", dir / "f.csv",
                                           "--features " + prefix + "_X.npy");
    expect_export_agrees(h, 300, 1e-4);
  }

  if (fs::exists(dir / "heads" / "n1.personal_head")) {
    const std::string personal = "--head " + (dir / "heads" / "n1.personal_head").string();
    const Prediction q = predict(personal, "--dataset fashion-mnist --limit 300", dir / "q.csv");
    ASSERT_EQ(q.run.code, 0) << q.run.output;
    EXPECT_GT(q.correct, 30);
    expect_export_agrees(export_and_check(personal, dir / "personal.pt", dir / "q.csv", fashion_mnist_for_python(300)), 300,
                         1e-4);
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Heads, EveryHeadKind,
    ::testing::Values(
        HeadKind{"fedtc", "--method fedtc --adapter-epochs 2 --adapter-min-steps 60", "adapter", 1e-4},
        HeadKind{"fedcgs", "--method fedcgs --personalize --personal-epochs 5", "lda", 1e-4},
        HeadKind{"fgl", "--method fgl --images-per-sample 0.3 --cnn-width 4 --cnn-hidden 16 --cnn-epochs 1 --cnn-min-steps 40", "cnn",
                 1e-4},
        HeadKind{"fedmitr",
                 "--method fedmitr --client-epochs 1 --client-min-steps 0 --receiver-head student --distill-stages 1"
                 " --images-per-stage 16 --inversion-iterations 6 --mask-at 2,4 --distill-epochs 1",
                 "vit", 1e-4},
        HeadKind{"fedmitr_ensemble", "--method fedmitr --client-epochs 1 --client-min-steps 0 --receiver-head ensemble",
                 "vit-ensemble", 1e-4},
        HeadKind{"fedmitr_ensemble_mean_logits",
                 "--method fedmitr --client-epochs 1 --client-min-steps 0 --receiver-head ensemble --ensemble mean-logits",
                 "vit-ensemble", 1e-4},
        HeadKind{"backbone", "--method fedpft --head-fit sgd --components 2 --covariance diag --backbone default --input-size 32 --feature-expansion 300",
                 "linear", 1e-4}),
    [](const ::testing::TestParamInfo<HeadKind>& info) { return std::string(info.param.name); });

// Image folders as predict reads them: class folders named by class number or name, a flat folder
// unlabelled, resized and converted RGB images, and a file that does not decode (--skip-bad).
TEST(UseTheModel, ImageFoldersByClassNameOrNumberOrUnlabelledClassifyAsTheirPixels) {
  const fs::path dir = test_dir("use_model");
  fs::create_directories(dir);
  const CliRun sim = run_cli("simulate --method fedcgs --dataset fashion-mnist --train-limit 900 --test-limit 100 --nodes 2"
                             " --no-baselines --quiet --save-heads " + (dir / "heads").string());
  ASSERT_EQ(sim.code, 0) << sim.output;
  // The first 40 test images as PNG: in class folders (by number, "Trouser" by name), flat, and
  // flat again at 56 x 56 in RGB.
  const std::string script =
      "import gzip, os, sys, numpy as np\n"
      "from PIL import Image\n"
      "d, out = sys.argv[1], sys.argv[2]\n"
      "n = [f for f in os.listdir(d) if f.startswith('t10k-images')][0]\n"
      "raw = open(os.path.join(d, n), 'rb').read()\n"
      "raw = gzip.decompress(raw) if n.endswith('.gz') else raw\n"
      "m = [f for f in os.listdir(d) if f.startswith('t10k-labels')][0]\n"
      "lab = open(os.path.join(d, m), 'rb').read()\n"
      "lab = gzip.decompress(lab) if m.endswith('.gz') else lab\n"
      "x = np.frombuffer(raw, np.uint8, offset=16)[:40 * 784].reshape(40, 28, 28)\n"
      "y = np.frombuffer(lab, np.uint8, offset=8)[:40]\n"
      "for i in range(40):\n"
      "    c = 'Trouser' if y[i] == 1 else str(y[i])\n"
      "    os.makedirs(os.path.join(out, 'classes', c), exist_ok=True)\n"
      "    Image.fromarray(x[i]).save(os.path.join(out, 'classes', c, '%02d.png' % i))\n"
      "    os.makedirs(os.path.join(out, 'flat', 'more'), exist_ok=True)\n"
      "    Image.fromarray(x[i]).save(os.path.join(out, 'flat', ('more/' if i % 2 else '') + '%02d.png' % i))\n"
      "    os.makedirs(os.path.join(out, 'big'), exist_ok=True)\n"
      "    Image.fromarray(x[i]).resize((56, 56), Image.NEAREST).convert('RGB').save(os.path.join(out, 'big', '%02d.png' % i))\n";
  {
    std::ofstream(dir / "make.py") << script;
  }
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir / "make.py").string() + " " + default_fashion_mnist_dir() + " " + dir.string()).c_str()), 0);
  const std::string head = "--head " + (dir / "heads" / "n1.head").string();

  const Prediction by_dataset = predict(head, "--dataset fashion-mnist --limit 40", dir / "d.csv");
  ASSERT_EQ(by_dataset.run.code, 0) << by_dataset.run.output;
  const Prediction by_folder = predict(head, "--images " + (dir / "classes").string(), dir / "c.csv");
  ASSERT_EQ(by_folder.run.code, 0) << by_folder.run.output;
  EXPECT_EQ(by_folder.samples, 40);
  EXPECT_EQ(by_folder.correct, by_dataset.correct);  // the same images, the same labels, the same pixels
  expect_export_agrees(export_and_check(head, dir / "m.pt", dir / "c.csv", "--images " + (dir / "classes").string()), 40, 1e-4);

  const Prediction flat = predict(head, "--images " + (dir / "flat").string(), dir / "f.csv");
  ASSERT_EQ(flat.run.code, 0) << flat.run.output;
  EXPECT_EQ(flat.correct, -1) << "unlabelled images have no accuracy: " << flat.run.output;
  EXPECT_NE(read_text(dir / "f.csv").find("more/01.png,"), std::string::npos);
  const Prediction big = predict(head, "--images " + (dir / "big").string(), dir / "b.csv");
  ASSERT_EQ(big.run.code, 0) << big.run.output;
  expect_export_agrees(export_and_check(head, dir / "m.pt", dir / "b.csv", "--images " + (dir / "big").string()), 40, 1e-4);

  // A file that does not decode: named, and left out with --skip-bad.
  std::ofstream(dir / "flat" / "broken.png") << "not a png";
  const CliRun broken = run_cli("predict " + head + " --images " + (dir / "flat").string() + " --quiet");
  EXPECT_EQ(broken.code, 1);
  EXPECT_NE(broken.output.find("broken.png"), std::string::npos) << broken.output;
  const Prediction skipped = predict(head, "--images " + (dir / "flat").string() + " --skip-bad", dir / "s.csv");
  EXPECT_EQ(skipped.run.code, 0) << skipped.run.output;
  // A class folder the head has no class for.
  fs::create_directories(dir / "classes" / "Giraffe");
  fs::copy_file(dir / "flat" / "00.png", dir / "classes" / "Giraffe" / "x.png");
  const CliRun unknown = run_cli("predict " + head + " --images " + (dir / "classes").string() + " --quiet");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.output.find("Giraffe: names no class of the head"), std::string::npos) << unknown.output;
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

// Acceptance 4: truncated, bit-flipped, foreign and foreign-backbone head files: exit 1, a clear error.
TEST(UseTheModel, DamagedForeignAndForeignBackboneHeadFilesAreRefused) {
  const fs::path dir = test_dir("use_model");
  fs::create_directories(dir);
  const CliRun sim = run_cli("simulate --method fedpft --components 1 --covariance diag --dataset fashion-mnist --backbone default"
                             " --input-size 32 --train-limit 300 --test-limit 50 --nodes 2 --no-baselines --quiet --save-heads " +
                             (dir / "heads").string());
  ASSERT_EQ(sim.code, 0) << sim.output;
  const fs::path good = dir / "heads" / "n1.head";
  const std::string bytes = read_text(good);
  const auto expect_refused = [&](const std::string& content, const std::string& words) {
    {
      std::ofstream(dir / "bad.head", std::ios::binary) << content;
    }
    const std::vector<std::string> commands = {"head info ", "predict --dataset fashion-mnist --limit 5 --head ",
                                               "export --out " + (dir / "x.pt").string() + " --head "};
    for (const std::string& command : commands) {
      const CliRun r = run_cli(command + (dir / "bad.head").string());
      EXPECT_EQ(r.code, 1) << command << r.output;
      EXPECT_NE(r.output.find(words), std::string::npos) << command << r.output;
    }
  };
  expect_refused(bytes.substr(0, bytes.size() / 2), "checksum mismatch");
  std::string flipped = bytes;
  flipped[bytes.size() / 3] = static_cast<char>(flipped[bytes.size() / 3] ^ 0x10);
  expect_refused(flipped, "checksum mismatch");
  expect_refused("\x89PNG\r\n\x1a\nnot a head at all", "not a fednode head file");
  expect_refused("", "not a fednode head file");

  // Another backbone file (or the same at another size) gives other features: refused, naming both fingerprints.
  const std::string other = (dir / "other.pt").string();
  fs::copy_file(std::string(FEDNODE_SOURCE_DIR) + "/tests/data/tiny_vit.pt", other);
  std::ofstream(other + ".preprocessing") << "input_size = 32\n";
  const CliRun foreign = run_cli("predict --head " + good.string() + " --backbone " + other + " --dataset fashion-mnist --limit 5");
  EXPECT_EQ(foreign.code, 1) << foreign.output;
  const HeadFile file = read_head_file(good.string());
  EXPECT_NE(foreign.output.find(file.card.recipe.backbone_fingerprint), std::string::npos) << foreign.output;
  EXPECT_NE(foreign.output.find(backbone_fingerprint(other, file.card.recipe.preprocessing)), std::string::npos) << foreign.output;
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace fednode::testing_network
