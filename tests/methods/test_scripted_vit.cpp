// A user's own TorchScript ViT (methods/fedmitr/vit.h, load_vit_script): tests/data/tiny_vit.pt,
// written by scripts/export_vit.py, holds the built-in architecture with its parameters in the
// built-in order, so that everything a node does with it -- forward, training, inversion -- can be
// checked against the built-in ViT on the same numbers.
#include "../common/node_context.h"
#include "methods/fedmitr/fedmitr.h"
#include "methods/fedmitr/vit.h"
#include "methods/fedmitr/vit_head.h"
#include "vit_samples.h"
#include "methods/fedmitr/model_knowledge.h"
#include "methods/fedmitr/fedmitr_options.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fednode {
namespace {

using ScriptedVit = test::OneTorchThread;
using test::random_images;

const std::string kTinyVit = std::string(FEDNODE_SOURCE_DIR) + "/tests/data/tiny_vit.pt";

// The built-in spec of tiny_vit.pt (tests/data/README.md).
VitSpec builtin_twin() {
  VitSpec s;
  s.dim = 16;
  s.depth = 1;
  s.heads = 2;
  s.mlp_dim = 16;
  return s;
}

// Equal up to float rounding: relative to the largest value (the scaled weights make scores of
// hundreds, summed in another order by the two graphs).
void expect_near(const MatrixF& a, const MatrixF& b, float tolerance, const char* what) {
  ASSERT_EQ(a.rows(), b.rows()) << what;
  ASSERT_EQ(a.cols(), b.cols()) << what;
  EXPECT_LE((a - b).cwiseAbs().maxCoeff(), tolerance * std::max(1.0f, b.cwiseAbs().maxCoeff())) << what;
}

// `scripted` and `builtin` give the same outputs on `images` (three of 16 patches each), whole and
// with the patches `stopped` (indices into the three images' 48) dropped, which get no attention.
void expect_same_forward(const VitModel& scripted, const VitModel& builtin, const MatrixF& images,
                         const std::vector<int>& stopped) {
  std::vector<uint8_t> keep(3 * 16, 1);
  for (int t : stopped) keep[static_cast<size_t>(t)] = 0;
  for (const std::vector<uint8_t>& k : {std::vector<uint8_t>{}, keep}) {
    const VitOutput a = vit_forward(scripted, images, k), b = vit_forward(builtin, images, k);
    expect_near(a.logits, b.logits, 1e-5f, "logits");
    expect_near(a.token_logits, b.token_logits, 1e-5f, "token logits");
    expect_near(a.cls_attention, b.cls_attention, 1e-5f, "CLS attention");
  }
  EXPECT_EQ(vit_forward(scripted, images, keep).cls_attention(0, stopped[0]), 0.0f);
}

TEST_F(ScriptedVit, LoadsItsSpecAndStartsFromItsFilesWeights) {
  const VitSpec s = load_vit_script(kTinyVit);
  EXPECT_TRUE(s.scripted());
  EXPECT_EQ(s.script.size(), 64u);
  EXPECT_EQ(s.image_size, 28);
  EXPECT_EQ(s.channels, 1);
  EXPECT_EQ(s.patch, 7);
  EXPECT_EQ(s.classes, 10);
  EXPECT_EQ(s.tokens(), 16);
  EXPECT_EQ(s.parameter_count(), builtin_twin().parameter_count());  // 2 986
  EXPECT_EQ(s.dim, 0);
  EXPECT_EQ(load_vit_script(kTinyVit), s);  // loaded once, the same spec after
  const VitModel start = vit_init(s, 1);
  EXPECT_EQ(static_cast<int64_t>(start.parameters.size()), s.parameter_count());
  EXPECT_EQ(vit_init(s, 2).parameters, start.parameters);  // the file's weights: no seed
}

TEST_F(ScriptedVit, ComputesWhatTheBuiltInComputesOnTheSameParameters) {
  const VitSpec s = load_vit_script(kTinyVit);
  VitModel scripted = vit_init(s, 0);
  for (float& p : scripted.parameters) p *= 20.0f;  // attention far from uniform
  const VitModel builtin{builtin_twin(), scripted.parameters};
  expect_same_forward(scripted, builtin, random_images(s, 3, 21), {2, 5, 16 + 1, 16 + 9, 32 + 0, 32 + 15});
}

// `fednode train-vit`'s file: the built-in model written in the script interface
// (vit_script_file) loads, starts from the model's parameters, and computes what the built-in
// computes, keep-mask included; a scripted model cannot be written again.
TEST_F(ScriptedVit, AWrittenBuiltInModelLoadsAndComputesAsTheBuiltIn) {
  VitModel builtin = vit_init(builtin_twin(), 3);
  for (float& p : builtin.parameters) p *= 20.0f;  // attention far from uniform
  const std::string path = ::testing::TempDir() + "/written_vit.pt";
  {
    const std::string bytes = vit_script_file(builtin);
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const VitSpec s = load_vit_script(path);
  EXPECT_TRUE(s.scripted());
  EXPECT_EQ(s.parameter_count(), builtin.spec.parameter_count());
  EXPECT_EQ(s.classes, builtin.spec.classes);
  const VitModel start = vit_init(s, 99);
  EXPECT_EQ(start.parameters, builtin.parameters);
  expect_same_forward(start, builtin, random_images(s, 3, 22), {0, 7, 16 + 3, 16 + 12, 32 + 5, 32 + 6});
  EXPECT_THROW(vit_script_file(start), InputError);
  std::filesystem::remove(path);
}

TEST_F(ScriptedVit, TrainsAndInvertsAsTheBuiltInDoes) {
  const VitSpec s = load_vit_script(kTinyVit);
  const VitModel start = vit_init(s, 0);
  const VitModel builtin_start{builtin_twin(), start.parameters};
  const MatrixF images = random_images(s, 96, 22);
  Labels labels(96);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int>(i % 10);
  VitTrainOptions o;
  o.epochs = 2;
  o.seed = 4;
  // Gradients reach the flat parameters through the module's attributes: the same steps.
  const VitModel trained = vit_train(start, images, labels, o);
  const VitModel builtin_trained = vit_train(builtin_start, images, labels, o);
  ASSERT_EQ(trained.parameters.size(), builtin_trained.parameters.size());
  double moved = 0, apart = 0;
  for (size_t i = 0; i < trained.parameters.size(); ++i) {
    moved = std::max(moved, static_cast<double>(std::abs(trained.parameters[i] - start.parameters[i])));
    apart = std::max(apart, static_cast<double>(std::abs(trained.parameters[i] - builtin_trained.parameters[i])));
  }
  EXPECT_GT(moved, 1e-3);
  EXPECT_LT(apart, 1e-4);
  EXPECT_EQ(vit_train(start, images, labels, o).parameters, trained.parameters);  // seeded

  InversionOptions inv;
  inv.iterations = 8;
  inv.mask_at = {2, 4};
  inv.seed = 3;
  const Inversion a = vit_invert({trained, trained}, &start, labels, inv);
  const Inversion b = vit_invert({builtin_trained, builtin_trained}, &builtin_start, labels, inv);
  EXPECT_LT(a.last_loss, a.first_loss);
  EXPECT_NEAR(a.first_loss, b.first_loss, 1e-4);
  EXPECT_EQ(a.keep.size(), b.keep.size());
  // The pixels' gradients too: TorchScript's own attention and products against the built-in's
  // fused ones (methods/fedmitr/attention_torch.h, linear_torch.h), through Adam and the masking.
  EXPECT_EQ(a.keep, b.keep);
  EXPECT_NEAR(a.last_loss, b.last_loss, 1e-4);
  EXPECT_LT((a.images - b.images).cwiseAbs().maxCoeff(), 1e-3f);
}

TEST_F(ScriptedVit, IsFedMitrsModelWhenANodeNamesIt) {
  FedMitrOptions o;
  o.vit_script = kTinyVit;
  o.client.epochs = 1;
  o.client.min_steps = 0;
  o.receiver.stages = 1;
  o.receiver.images_per_stage = 8;
  o.receiver.inversion.iterations = 4;
  o.receiver.inversion.mask_at = {2};
  o.receiver.distill.epochs = 1;
  o.receiver_head = ReceiverHead::Student;
  const auto method = make_fedmitr(o);
  const VitSpec s = load_vit_script(kTinyVit);
  Features data;
  data.num_classes = 10;
  data.X = random_images(s, 40, 5);
  for (int i = 0; i < 40; ++i) data.y.push_back(i % 10);
  const NodeContext c0 = test::node_context(0, 10, 784, 5), c1 = test::node_context(1, 10, 784, 5);
  const Knowledge k1 = method->summarize(data, c1);
  EXPECT_TRUE(body_of<ModelKnowledge>(k1.payload).models.at(0).model.spec == s);
  EXPECT_NO_THROW(method->validate(k1, c0, "piece"));
  const auto head = method->fit_head({k1}, &data, c0);  // its own model and node 1's, distilled
  ASSERT_EQ(head->kind(), "vit");
  std::stringstream file;
  head->save(file);
  const auto loaded = Head::load(file, "head file");
  EXPECT_TRUE(dynamic_cast<const VitHead&>(*loaded).model().spec == s);
  EXPECT_EQ(loaded->scores(data.X), head->scores(data.X));
  // The ensemble head of scripted models scores as its teacher; its export needs the script.
  FedMitrOptions ensemble = o;
  ensemble.receiver_head = ReceiverHead::Ensemble;
  const auto mixed = make_fedmitr(ensemble)->fit_head({k1}, &data, c0);
  ASSERT_EQ(mixed->kind(), "vit-ensemble");
  EXPECT_EQ(mixed->scores(data.X).rows(), 40);
  EXPECT_THROW(mixed->script(), InputError);
  // A node of the built-in ViT refuses the scripted one, and says which it is.
  FedMitrOptions builtin = o;
  builtin.vit_script.clear();
  try {
    make_fedmitr(builtin)->validate(k1, c0, "piece");
    ADD_FAILURE() << "a scripted model was accepted by a built-in node";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("TorchScript"), std::string::npos) << e.what();
  }
  // Data of another size than the script's images is refused before any training.
  Features small = data;
  small.X = data.X.leftCols(144);
  EXPECT_THROW(method->summarize(small, test::node_context(1, 10, 144, 5)), InputError);
}

// What scripts/export_vit.py writes with this machine's PyTorch loads: another geometry, colour.
TEST_F(ScriptedVit, TheExportScriptWritesWhatLoads) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "the export needs /usr/bin/python3 with torch (Debian: python3-torch)";
  const auto dir = std::filesystem::temp_directory_path() / "fednode_export_vit";
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "colour.pt").string();
  const std::string cmd = "/usr/bin/python3 " + std::string(FEDNODE_SOURCE_DIR) +
                          "/scripts/export_vit.py --image-size 12 --channels 3 --patch 4 --dim 8 --depth 1 --heads 2 "
                          "--mlp 8 --classes 5 --out " + out + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const VitSpec s = load_vit_script(out);
  EXPECT_EQ(s.image_size, 12);
  EXPECT_EQ(s.channels, 3);
  EXPECT_EQ(s.tokens(), 9);
  EXPECT_EQ(s.classes, 5);
  VitSpec twin;
  twin.image_size = 12, twin.channels = 3, twin.patch = 4, twin.dim = 8, twin.depth = 1, twin.heads = 2, twin.mlp_dim = 8,
  twin.classes = 5;
  EXPECT_EQ(s.parameter_count(), twin.parameter_count());
  const VitModel m = vit_init(s, 0);
  const VitOutput a = vit_forward(m, random_images(s, 2, 3)), b = vit_forward({twin, m.parameters}, random_images(s, 2, 3));
  expect_near(a.logits, b.logits, 1e-5f, "logits");
  std::filesystem::remove_all(dir);
}

TEST_F(ScriptedVit, AFileThatIsNoViTScriptIsRefusedByName) {
  const auto dir = std::filesystem::temp_directory_path() / "fednode_scripted_vit";
  std::filesystem::create_directories(dir);
  const std::string missing = (dir / "missing.pt").string();
  EXPECT_THROW(load_vit_script(missing), InputError);
  const std::string garbage = (dir / "garbage.pt").string();
  std::ofstream(garbage) << "not a zip archive";
  try {
    load_vit_script(garbage);
    FAIL() << "garbage loaded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(garbage), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("TorchScript"), std::string::npos) << e.what();
  }
  // A spec naming a script this process never loaded cannot run.
  VitSpec unknown = load_vit_script(kTinyVit);
  unknown.script = std::string(64, 'a');
  const VitModel m{unknown, std::vector<float>(static_cast<size_t>(unknown.parameter_count()), 0.0f)};
  EXPECT_THROW(vit_forward(m, random_images(unknown, 1, 1)), InputError);
  // Scripted specs must leave the built-in fields at 0 and name the file by a SHA-256.
  VitSpec bad = load_vit_script(kTinyVit);
  bad.dim = 16;
  EXPECT_THROW(bad.validate("test"), InputError);
  bad = load_vit_script(kTinyVit);
  bad.script = "XYZ";
  EXPECT_THROW(bad.validate("test"), InputError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fednode
