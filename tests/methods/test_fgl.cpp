// FGL (methods/fgl/): a receiver asks for the classes' counts added over the shards it holds;
// the built-in generator's sidecar reads back what it wrote and refuses what it cannot run; the
// same seeds draw bit-identical images; knowledge merges by union of shards; the head trains on
// what the generator drew.
#include "../common/expect_error.h"
#include "../common/node_context.h"
#include "core/openmp_threads.h"
#include "core/rng.h"
#include "core/torch_library.h"
#include "methods/fgl/cnn.h"
#include "methods/fgl/fgl.h"
#include "methods/fgl/torch_generator.h"
#include "methods/fgl/requests.h"
#include "methods/fgl/prompt_knowledge.h"
#include "methods/fgl/fgl_options.h"

#include <gtest/gtest.h>

#include <sstream>

namespace fednode {
namespace {

ClassPrompts prompt(int label, int64_t count, const std::string& name, const std::string& text) {
  ClassPrompts c;
  c.label = label;
  c.count = count;
  c.name = name;
  c.prompt = text;
  return c;
}

int64_t total(const std::vector<GenerationRequest>& requests, int label) {
  int64_t n = 0;
  for (const auto& r : requests)
    if (r.label == label) n += r.count;
  return n;
}

TEST(FglRequests, CountsAddUpByClassOverTheShards) {
  PromptShard a, b;
  a.owner = 0;
  b.owner = 1;
  a.classes = {prompt(0, 3, "cat", "cat, photo"), prompt(2, 4, "dog", "dog, photo")};
  b.classes = {prompt(0, 5, "cat", "cat, photo"), prompt(1, 2, "owl", "owl, photo")};
  FglOptions o;
  const auto requests = synthesis_requests({&a, &b}, o);
  ASSERT_EQ(requests.size(), 3u);  // one request for class 0's one text, not one per shard
  EXPECT_EQ(requests[0].label, 0);
  EXPECT_EQ(requests[0].count, 8);
  EXPECT_EQ(requests[0].name, "cat");
  EXPECT_EQ(total(requests, 1), 2);
  EXPECT_EQ(total(requests, 2), 4);

  // A node with its own prompt keeps it; scaled totals stay exact per class.
  b.classes[0].prompt = "a cat, drawing";
  o.images_per_sample = 2.5;
  const auto scaled = synthesis_requests({&a, &b}, o);
  EXPECT_EQ(total(scaled, 0), 20);
  EXPECT_EQ(total(scaled, 1), 5);
  EXPECT_EQ(total(scaled, 2), 10);
  int class_zero_requests = 0;
  for (const auto& r : scaled) class_zero_requests += r.label == 0;
  EXPECT_EQ(class_zero_requests, 2);
  o.max_images_per_class = 7;
  const auto capped = synthesis_requests({&a, &b}, o);
  EXPECT_EQ(total(capped, 0), 7);
  EXPECT_EQ(total(capped, 1), 5);
  EXPECT_EQ(total(capped, 2), 7);
}

TEST(FglRequests, EveryCaptionIsARequestOfItsOwn) {
  PromptShard a;
  a.owner = 3;
  a.classes = {prompt(4, 5, "boot", "boot, photo")};
  a.classes[0].captions = {"a brown boot", "a black boot"};
  const auto requests = synthesis_requests({&a}, FglOptions{});
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].caption, "");
  EXPECT_EQ(requests[0].count, 3);
  EXPECT_EQ(requests[1].caption, "a black boot");
  EXPECT_EQ(requests[1].count, 1);
  EXPECT_EQ(requests[2].caption, "a brown boot");
}

TEST(FglPrompts, OwnPromptsNameEveryHeldClassOrSayWhichHasNoName) {
  Features local;
  local.X = MatrixF::Zero(4, 2);
  local.y = {0, 2, 2, 0};
  local.num_classes = 3;
  const PromptShard s = own_prompts(local, 5, {"cat", "owl", "dog"}, FglOptions{});
  ASSERT_EQ(s.classes.size(), 2u);
  EXPECT_EQ(s.owner, 5u);
  EXPECT_EQ(s.classes[1].label, 2);
  EXPECT_EQ(s.classes[1].count, 2);
  EXPECT_EQ(s.classes[1].prompt, "dog, real world images, high resolution");
  EXPECT_EQ(s.classes[1].negative_prompt, "low quality, low resolution");
  try {
    own_prompts(local, 5, {"cat"}, FglOptions{});
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("class 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--class-names"), std::string::npos) << e.what();
  }
}

TEST(GeneratorInfo, ReadsBackWhatItWritesAndNamesWhatIsWrong) {
  GeneratorInfo info;
  info.latent = 16;
  info.image_size = 8;
  info.channels = 1;
  info.vocabulary = {"T-shirt/top", "Ankle boot", "#1 bag"};
  info.provenance = {"fashion-mnist training images 50000 to 59999"};
  const GeneratorInfo back = GeneratorInfo::parse(info.to_text(), "g.pt.generator");
  EXPECT_EQ(back.latent, 16);
  EXPECT_EQ(back.image_size, 8);
  EXPECT_EQ(back.vocabulary, info.vocabulary);
  EXPECT_EQ(back.provenance, info.provenance);
  EXPECT_EQ(back.kind, Conditioning::Label);
  // A text generator reads prompts: its class lines are optional.
  const GeneratorInfo text = GeneratorInfo::parse("kind = text\nlatent = 4\nimage_size = 8\nchannels = 3\n", "t");
  EXPECT_EQ(text.kind, Conditioning::Text);
  EXPECT_TRUE(text.vocabulary.empty());
  const auto refused = [](const std::string& text, const std::string& mentions) {
    try {
      GeneratorInfo::parse(text, "g.pt.generator");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
    }
  };
  const std::string base = "kind = label\nlatent = 4\nimage_size = 8\nchannels = 1\n";
  refused(base, "names no class");
  refused(base + "class = a\nclass = a\n", "listed twice");
  refused("kind = image\nlatent = 4\nimage_size = 8\nchannels = 1\nclass = a\n", "kind 'image' (label or text)");
  refused("latent = 4\nimage_size = 8\nchannels = 1\nclass = a\n", "'kind' is missing");
  refused(base + "class = a\ncolour = red\n", "unknown key 'colour'");
  refused("kind = label\nlatent = 4\nimage_size = 10\nchannels = 1\nclass = a\n", "multiple of 4");
  refused("kind = label\nlatent = four\nimage_size = 8\nchannels = 1\nclass = a\n", "g.pt.generator:2");
}

// A generator small enough to train in a test: 2 classes of 8 x 8 images, one epoch.
struct TinyGenerator {
  std::shared_ptr<const Generator> generator;
  explicit TinyGenerator(Conditioning kind = Conditioning::Label) {
    Rng rng = Rng::stream(4, Purpose::Generic);
    MatrixF images(128, 64);
    Labels labels(128);
    for (int i = 0; i < 128; ++i) {
      labels[static_cast<size_t>(i)] = i % 2;
      for (int p = 0; p < 64; ++p) images(i, p) = static_cast<float>(0.5 * rng.uniform() + (i % 2 ? 0.5 * (p < 32) : 0.0));
    }
    GeneratorTrainOptions o;
    o.latent = 4;
    o.width = 4;
    o.epochs = 1;
    o.batch_size = 32;
    o.conditioning = kind;
    TrainedGenerator g = train_generator(images, labels, 1, 8, {"dark", "light"}, o);
    generator = make_torch_generator(g.module, g.info, "tiny");
  }
};

const std::shared_ptr<const Generator>& tiny_generator() {
  static const TinyGenerator tiny;
  return tiny.generator;
}

const std::shared_ptr<const Generator>& tiny_text_generator() {
  static const TinyGenerator tiny(Conditioning::Text);
  return tiny.generator;
}

// One LibTorch thread while a test runs, OpenMP's default again after it: the other suites
// check that training leaves the default in place.
class FglGenerator : public ::testing::Test {
 protected:
  void SetUp() override { set_torch_threads(1); }
  void TearDown() override { set_torch_threads(openmp_thread_default()); }
};

TEST_F(FglGenerator, TheSameSeedsDrawBitIdenticalImages) {
  GenerationRequest light;
  light.label = 7;
  light.name = "light";
  light.count = 5;
  GenerationRequest dark = light;
  dark.label = 3;
  dark.name = "dark";
  dark.count = 300;  // more than one of the generator's batches
  const ImageBatch a = tiny_generator()->generate({light, dark}, 11, nullptr);
  const ImageBatch b = tiny_generator()->generate({light, dark}, 11, nullptr);
  ASSERT_EQ(a.pixels.rows(), 305);
  EXPECT_EQ(a.pixels.cols(), 64);
  EXPECT_EQ(a.channels, 1);
  EXPECT_EQ(a.size, 8);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.labels.front(), 7);
  EXPECT_EQ(a.labels.back(), 3);
  EXPECT_GE(a.pixels.minCoeff(), 0.0f);
  EXPECT_LE(a.pixels.maxCoeff(), 1.0f);
  const ImageBatch c = tiny_generator()->generate({light, dark}, 12, nullptr);
  EXPECT_NE(a.pixels, c.pixels);
  // A request's images do not depend on how many the others asked for.
  dark.count = 1;
  const ImageBatch d = tiny_generator()->generate({light, dark}, 11, nullptr);
  EXPECT_EQ(d.pixels.topRows(5), a.pixels.topRows(5));
}

// A text generator draws from the prompt (the caption where there is one), bit for bit the same
// for the same seed, and any text encodes: it looks nothing up.
TEST_F(FglGenerator, ATextGeneratorDrawsFromThePromptOrTheCaption) {
  GenerationRequest light;
  light.label = 1;
  light.name = "light";
  light.prompt = "light, real world images, high resolution";
  light.negative_prompt = "low quality";
  light.count = 4;
  GenerationRequest other = light;
  other.name = "never seen";
  other.prompt = "Zebra crossing at night";
  const auto& g = tiny_text_generator();
  EXPECT_NE(g->describe().find("text generator"), std::string::npos) << g->describe();
  const ImageBatch a = g->generate({light, other}, 5, nullptr);
  EXPECT_EQ(a.pixels.rows(), 8);
  EXPECT_EQ(a.pixels, g->generate({light, other}, 5, nullptr).pixels);
  EXPECT_EQ(a.labels, (Labels{1, 1, 1, 1, 1, 1, 1, 1}));
  // The same latent noise (the same request index and seed) with another text: other images.
  EXPECT_NE(a.pixels.topRows(4), g->generate({other}, 5, nullptr).pixels);
  // Case and punctuation do not change the words.
  GenerationRequest shouted = light;
  shouted.prompt = "LIGHT -- real world images; high resolution!";
  EXPECT_EQ(g->generate({shouted}, 5, nullptr).pixels, a.pixels.topRows(4));
  // A caption stands for the prompt.
  GenerationRequest captioned = other;
  captioned.caption = light.prompt;
  EXPECT_EQ(g->generate({captioned}, 5, nullptr).pixels, a.pixels.topRows(4));
}

TEST_F(FglGenerator, AClassTheVocabularyLacksIsNamed) {
  GenerationRequest r;
  r.name = "Sneaker";
  r.count = 1;
  try {
    tiny_generator()->generate({r}, 1, nullptr);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no class 'Sneaker' (its vocabulary: dark, light)"), std::string::npos)
        << e.what();
  }
}

TEST_F(FglGenerator, KnowledgeMergesByShardAndTheHeadTrainsOnWhatWasDrawn) {
  MethodOptions options;
  options.method = "fgl";
  own_options<FglOptions>(options).generator = "tiny";  // opened through the descriptor in a run; given directly here
  own_options<FglOptions>(options).receiver = FglOptions::Receiver::Linear;
  options.fedpft.head.lr = 1e-2;
  options.fedpft.head.min_steps = 50;
  options.fedpft.head.epochs = 2;
  const auto method = make_fgl(options);
  Features a, b;
  a.X = MatrixF::Zero(6, 64);
  a.y = {0, 0, 0, 0, 1, 1};
  b.X = MatrixF::Zero(3, 64);
  b.y = {1, 1, 1};
  a.num_classes = b.num_classes = 2;
  NodeContext ca = test::node_context(0, 2, 64, 9), cb = test::node_context(1, 2, 64, 9);
  for (NodeContext* c : {&ca, &cb}) {
    c->class_names = {"dark", "light"};
    c->resource = tiny_generator();
  }
  const Knowledge ka = method->summarize(a, ca);
  const Knowledge merged = method->merge({ka}, &b, cb);
  EXPECT_EQ(merged.contributors, (Contributors{0, 1}));
  const auto& shards = body_of<PromptKnowledge>(merged.payload).shards;
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_EQ(shards[1].classes[0].count, 3);
  // Receiving what it already holds adds nothing: the union is by owner.
  const Knowledge again = method->merge({merged, ka}, &b, cb);
  EXPECT_EQ(body_of<PromptKnowledge>(again.payload).shards.size(), 2u);
  const auto head = method->fit_head({merged}, nullptr, ca);
  const auto head_again = method->fit_head({merged}, nullptr, ca);
  EXPECT_EQ(head->num_classes(), 2);
  EXPECT_EQ(head->dim(), 64);
  const MatrixF probe = MatrixF::Constant(3, 64, 0.4f);
  EXPECT_EQ(head->scores(probe), head_again->scores(probe));
  // Without a generator the node says what it lacks.
  NodeContext none = ca;
  none.resource = nullptr;
  EXPECT_THROW(method->fit_head({merged}, nullptr, none), InputError);
}

// A node whose features are its images pooled 2 x 2 (as a backbone would give other features than
// the pixels): the linear receiver must read the synthetic images the same way.
class PoolingEncoder final : public ImageEncoder {
 public:
  std::string describe() const override { return "2 x 2 pooling"; }
  MatrixF encode(const ImageBatch& images, const std::atomic<bool>*) const override {
    const int s = images.size, h = s / 2;
    MatrixF out = MatrixF::Zero(images.pixels.rows(), h * h);
    for (Eigen::Index i = 0; i < images.pixels.rows(); ++i)
      for (int r = 0; r < s; ++r)
        for (int c = 0; c < s; ++c) out(i, (r / 2) * h + c / 2) += 0.25f * images.pixels(i, r * s + c);
    return out;
  }
};

TEST_F(FglGenerator, TheLinearReceiverReadsTheImagesAsTheNodeReadItsOwn) {
  MethodOptions options;
  options.method = "fgl";
  own_options<FglOptions>(options).receiver = FglOptions::Receiver::Linear;
  options.fedpft.head.lr = 1e-2;
  options.fedpft.head.epochs = 2;
  Features a;
  a.X = MatrixF::Zero(6, 16);
  a.y = {0, 0, 0, 1, 1, 1};
  a.num_classes = 2;
  NodeContext ctx = test::node_context(0, 2, 16, 9);
  ctx.class_names = {"dark", "light"};
  ctx.resource = tiny_generator();
  ctx.image_encoder = std::make_shared<PoolingEncoder>();
  const auto method = make_fgl(options);
  const Knowledge k = method->summarize(a, ctx);
  const auto head = method->fit_head({k}, nullptr, ctx);
  EXPECT_EQ(head->dim(), 16);  // trained on the pooled images, not on the generator's 64 pixels
  const MatrixF probe = MatrixF::Constant(2, 16, 0.3f);
  EXPECT_EQ(head->scores(probe), method->fit_head({k}, nullptr, ctx)->scores(probe));

  // Features from images fednode never saw (.npy) cannot be matched: the error says so.
  ctx.image_encoder = nullptr;
  test::expect_input_error([&] { method->fit_head({k}, nullptr, ctx); }, {"8 x 8 pixels", ".npy"});
  // The CNN needs the pixels themselves.
  own_options<FglOptions>(options).receiver = FglOptions::Receiver::Cnn;
  ctx.image_encoder = std::make_shared<PoolingEncoder>();
  test::expect_input_error([&] { make_fgl(options)->fit_head({k}, nullptr, ctx); }, {"--receiver linear"});
}

TEST(FglCnn, ItsParametersAreTheLayersAndAnImpossibleSpecIsNamed) {
  CnnSpec s;  // 28 x 28 x 1, width 32, hidden 128, 10 classes
  EXPECT_EQ(s.parameter_count(), (32 * 9 + 32) + (64 * 32 * 9 + 64) + (128 * 64 * 49 + 128) + (10 * 128 + 10));
  EXPECT_EQ(cnn_init(s, 3).parameters.size(), static_cast<size_t>(s.parameter_count()));
  EXPECT_EQ(cnn_init(s, 3).parameters, cnn_init(s, 3).parameters);
  s.image_size = 30;
  EXPECT_THROW(s.validate("cnn"), InputError);
  s.image_size = 4096;
  s.width = 4096;
  EXPECT_THROW(s.validate("cnn"), InputError);  // billions of parameters: refused, not allocated
}

TEST_F(FglGenerator, TheCnnLearnsAndSurvivesAHeadFile) {
  // Class 1's images are bright in their top half, class 0's are not.
  Rng rng = Rng::stream(6, Purpose::Generic);
  MatrixF X(200, 64);
  Labels y(200);
  for (int i = 0; i < 200; ++i) {
    y[static_cast<size_t>(i)] = i % 2;
    for (int p = 0; p < 64; ++p) X(i, p) = static_cast<float>(0.4 * rng.uniform() + (i % 2 && p < 32 ? 0.6 : 0.0));
  }
  CnnSpec s;
  s.image_size = 8;
  s.width = 4;
  s.hidden = 8;
  s.classes = 2;
  CnnTrainOptions o;
  o.epochs = 1;
  o.min_steps = 300;
  o.lr = 0.05;
  o.batch_size = 20;
  o.seed = 2;
  const CnnModel start = cnn_init(s, 1);
  const CnnHead untrained(start), head(train_cnn(start, X, y, o));
  Features f;
  f.X = X;
  f.y = y;
  f.num_classes = 2;
  EXPECT_GE(head.accuracy(f), 0.95);
  EXPECT_EQ(CnnHead(train_cnn(start, X, y, o)).scores(X), head.scores(X));  // the same seeds, the same CNN
  std::stringstream file;
  head.save(file);
  const auto back = Head::load(file, "cnn head");
  EXPECT_EQ(back->kind(), "cnn");
  EXPECT_EQ(back->scores(X), head.scores(X));
  EXPECT_THROW(train_cnn(start, X.leftCols(32), y, o), InputError);
}

}  // namespace
}  // namespace fednode
