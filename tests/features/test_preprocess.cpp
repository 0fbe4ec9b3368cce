// Preprocessing: the sidecar format and the pixel arithmetic, against numbers PyTorch produced
// (torch.nn.functional.interpolate, align_corners=False; tests/features/torch_reference.py).
#include "features/preprocess.h"

#include "../common/expect_error.h"
#include "../common/temp_dir.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fednode {
namespace {

const char* kFullSidecar =
    "# a comment line\n"
    "input_size = 96\n"
    "channels = 3   # trailing comment\n"
    "channel_order = BGR\n"
    "grayscale = reject\n"
    "resize = nearest\n"
    "fit = center_crop\n"
    "value_range = 0-255\n"
    "mean = 0.485, 0.456, 0.406\n"
    "std = 0.229,0.224,0.225\n"
    "output_dim = 512\n";

void expect_parse_error(const std::string& text, const std::string& fragment) {
  SCOPED_TRACE("sidecar text:\n" + text);
  test::expect_input_error([&] { Preprocessing::parse(text, "side.txt"); }, {fragment});
}

TEST(Sidecar, ParsesEveryKey) {
  const Preprocessing p = Preprocessing::parse(kFullSidecar, "side.txt");
  EXPECT_EQ(p.input_size, 96);
  EXPECT_EQ(p.channels, 3);
  EXPECT_EQ(p.channel_order, ChannelOrder::Bgr);
  EXPECT_FALSE(p.grayscale_to_rgb);
  EXPECT_EQ(p.resize, ResizeMode::Nearest);
  EXPECT_EQ(p.fit, FitMode::CenterCrop);
  EXPECT_EQ(p.value_range, ValueRange::Byte);
  EXPECT_EQ(p.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_EQ(p.std, (std::vector<float>{0.229f, 0.224f, 0.225f}));
  EXPECT_EQ(p.output_dim, 512);
}

TEST(Sidecar, DefaultsAndRoundTrip) {
  const Preprocessing d = Preprocessing::parse("input_size = 64\n", "s");
  EXPECT_EQ(d.channels, 3);
  EXPECT_EQ(d.channel_order, ChannelOrder::Rgb);
  EXPECT_TRUE(d.grayscale_to_rgb);
  EXPECT_EQ(d.resize, ResizeMode::Bilinear);
  EXPECT_EQ(d.fit, FitMode::Stretch);
  EXPECT_EQ(d.value_range, ValueRange::Unit);
  EXPECT_TRUE(d.mean.empty());
  EXPECT_EQ(d.output_dim, 0);

  const Preprocessing p = Preprocessing::parse(kFullSidecar, "side.txt");
  const Preprocessing q = Preprocessing::parse(p.to_text(), "round trip");
  EXPECT_EQ(q.canonical(), p.canonical());
  EXPECT_EQ(q.output_dim, p.output_dim);
}

TEST(Sidecar, CanonicalTextSeparatesWhatChangesFeatures) {
  Preprocessing a = Preprocessing::parse("input_size = 64\n", "s");
  Preprocessing b = a;
  b.output_dim = 1280;  // a check, not a transformation
  EXPECT_EQ(a.canonical(), b.canonical());
  b.input_size = 96;
  EXPECT_NE(a.canonical(), b.canonical());
  Preprocessing c = a;
  c.mean = {0.5f, 0.5f, 0.5f};
  c.std = {0.25f, 0.25f, 0.25f};
  EXPECT_NE(a.canonical(), c.canonical());
  Preprocessing d = a;
  d.resize = ResizeMode::Nearest;
  EXPECT_NE(a.canonical(), d.canonical());
}

TEST(Sidecar, RejectsMalformedFilesWithLineAndKey) {
  expect_parse_error("channels = 3\n", "input_size is required");
  expect_parse_error("input_size = 64\ncolour = red\n", "side.txt:2: unknown key 'colour'");
  expect_parse_error("input_size = 64\ninput_size = 96\n", "side.txt:2: 'input_size' already given on line 1");
  expect_parse_error("input_size 64\n", "side.txt:1: expected 'key = value'");
  expect_parse_error("input_size = sixty\n", "expected an integer");
  expect_parse_error("input_size = 4\n", "outside [8, 2048]");
  expect_parse_error("input_size = 64\nresize = bicubic\n", "'bicubic' is not one of bilinear | nearest");
  expect_parse_error("input_size = 64\nchannels = 2\n", "must be 1 or 3");
  expect_parse_error("input_size = 64\nmean = 0.5,0.5,0.5\n", "mean and std must both");
  expect_parse_error("input_size = 64\nmean = 0.5,0.5\nstd = 1,1\n", "need 3 numbers each");
  expect_parse_error("input_size = 64\nmean = 0,0,0\nstd = 1,0,1\n", "std values must be positive");
  expect_parse_error("input_size = 64\nmean = 0,x,0\nstd = 1,1,1\n", "comma-separated numbers");
  expect_parse_error("input_size = 64\noutput_dim = 0\n", "outside [1,");
}

TEST(Sidecar, LoadRejectsMissingAndBinaryFiles) {
  EXPECT_THROW(Preprocessing::load("/nonexistent/model.pt.preprocessing"), InputError);
  const test::TempDir dir("fednode_preprocess");
  const std::string path = dir / "binary.preprocessing";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    const char bytes[] = {'P', 'K', 3, 4, 0, 0, 1};
    std::fwrite(bytes, 1, sizeof bytes, f);
    std::fclose(f);
  }
  test::expect_input_error([&] { Preprocessing::load(path); }, {"binary content", path});
  EXPECT_EQ(sidecar_path("dir/m.pt"), "dir/m.pt.preprocessing");
}

// The 3x4 gray image the PyTorch reference numbers below were computed from.
const std::vector<uint8_t> kGray34 = {0, 50, 100, 150, 200, 250, 30, 60, 90, 120, 180, 240};

std::vector<float> run(const ImageView& img, const Preprocessing& p) {
  std::vector<float> out(static_cast<size_t>(p.channels) * p.input_size * p.input_size, -99.0f);
  preprocess_image(img, p, out.data(), "test image");
  return out;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

TEST(Preprocess, BilinearMatchesPyTorchUpAndDown) {
  Preprocessing p;
  p.channels = 1;
  p.input_size = 8;  // validate() bounds apply to sidecars; the kernel itself takes any size
  const ImageView img{kGray34.data(), 3, 4, 1};
  p.input_size = 5;
  expect_near_all(run(img, p),
                  {0.0f, 0.137254909f, 0.294117659f, 0.450980395f, 0.588235319f, 0.313725531f, 0.450980425f,
                   0.396078438f, 0.331764698f, 0.447058856f, 0.784313738f, 0.921568573f, 0.549019635f,
                   0.152941212f, 0.235294163f, 0.525490165f, 0.629803896f, 0.572549045f, 0.527058899f,
                   0.658823609f, 0.352941185f, 0.435294122f, 0.588235319f, 0.776470602f, 0.941176534f},
                  1e-6f);
  p.input_size = 2;
  expect_near_all(run(img, p), {0.294117659f, 0.411764711f, 0.529411793f, 0.661764741f}, 1e-6f);
}

TEST(Preprocess, NearestMatchesPyTorch) {
  Preprocessing p;
  p.channels = 1;
  p.resize = ResizeMode::Nearest;
  p.input_size = 5;
  const ImageView img{kGray34.data(), 3, 4, 1};
  expect_near_all(run(img, p),
                  {0.0f, 0.0f, 0.196078435f, 0.392156869f, 0.588235319f, 0.0f, 0.0f, 0.196078435f,
                   0.392156869f, 0.588235319f, 0.784313738f, 0.784313738f, 0.980392158f, 0.117647059f,
                   0.235294119f, 0.784313738f, 0.784313738f, 0.980392158f, 0.117647059f, 0.235294119f,
                   0.352941185f, 0.352941185f, 0.470588237f, 0.70588237f, 0.941176474f},
                  1e-6f);
}

TEST(Preprocess, SameSizeIsIdentity) {
  Preprocessing p;
  p.channels = 1;
  p.input_size = 2;
  const std::vector<uint8_t> px = {10, 20, 30, 40};
  expect_near_all(run({px.data(), 2, 2, 1}, p), {10 / 255.f, 20 / 255.f, 30 / 255.f, 40 / 255.f}, 1e-7f);
  p.resize = ResizeMode::Nearest;
  p.value_range = ValueRange::Byte;
  expect_near_all(run({px.data(), 2, 2, 1}, p), {10, 20, 30, 40}, 0.0f);
}

TEST(Preprocess, CenterCropGrayRepeatBgrAndNormalisationMatchPyTorch) {
  // 3x6 gray image, center_crop to 4: resized to 4x8, columns 2..5 kept; repeated to 3 channels,
  // reversed to BGR, then (x - mean) / std per output channel.
  std::vector<uint8_t> px;
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 6; ++x) px.push_back(static_cast<uint8_t>((x * 40 + y * 7) % 256));
  Preprocessing p;
  p.input_size = 4;
  p.channel_order = ChannelOrder::Bgr;
  p.fit = FitMode::CenterCrop;
  p.mean = {0.5f, 0.4f, 0.3f};
  p.std = {0.2f, 0.25f, 0.5f};
  expect_near_all(
      run({px.data(), 3, 6, 1}, p),
      {-1.42156863f, -0.833333254f, -0.245098025f, 0.343137383f, -1.3357842f, -0.747548938f, -0.159313679f,
       0.42892158f, -1.23284304f, -0.644607842f, -0.0563724339f, 0.531862974f, -1.14705873f, -0.558823466f,
       0.029411912f, 0.617647171f, -0.737254918f, -0.266666651f, 0.203921556f, 0.674509883f, -0.668627441f,
       -0.198039174f, 0.272549033f, 0.74313724f, -0.586274505f, -0.115686297f, 0.354902029f, 0.825490355f,
       -0.517647028f, -0.0470588207f, 0.423529506f, 0.894117713f, -0.168627471f, 0.0666666627f, 0.301960766f,
       0.53725493f, -0.134313732f, 0.100980401f, 0.336274505f, 0.571568608f, -0.0931372643f, 0.142156839f,
       0.377451003f, 0.612745166f, -0.0588235259f, 0.176470578f, 0.411764741f, 0.647058845f},
      2e-6f);
}

TEST(Preprocess, RgbToSingleChannelUsesPilLuma) {
  std::vector<uint8_t> px;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 5; ++x)
      for (int c = 0; c < 3; ++c) px.push_back(static_cast<uint8_t>((x * 30 + c * 70 + y * 11) % 256));
  Preprocessing p;
  p.channels = 1;
  p.input_size = 8;
  p.resize = ResizeMode::Nearest;
  p.value_range = ValueRange::Byte;
  const std::vector<float> out = run({px.data(), 2, 5, 3}, p);
  const std::vector<float> first_two_rows = {57, 57, 87, 87, 117, 147, 147, 148, 57, 57, 87, 87, 117, 147, 147, 148};
  expect_near_all(std::vector<float>(out.begin(), out.begin() + 16), first_two_rows, 0.0f);
}

TEST(Preprocess, RgbChannelsStayPlanarAndBgrSwaps) {
  const std::vector<uint8_t> px = {10, 20, 30, 40, 50, 60};  // 1x2 RGB
  Preprocessing p;
  p.input_size = 2;
  p.value_range = ValueRange::Byte;
  p.resize = ResizeMode::Nearest;
  // Nearest 1x2 -> 2x2 duplicates the row.
  expect_near_all(run({px.data(), 1, 2, 3}, p), {10, 40, 10, 40, 20, 50, 20, 50, 30, 60, 30, 60}, 0.0f);
  p.channel_order = ChannelOrder::Bgr;
  expect_near_all(run({px.data(), 1, 2, 3}, p), {30, 60, 30, 60, 20, 50, 20, 50, 10, 40, 10, 40}, 0.0f);
}

TEST(Preprocess, RejectsImagesItCannotTake) {
  Preprocessing p;
  p.input_size = 8;
  p.grayscale_to_rgb = false;
  const std::vector<uint8_t> px(16, 7);
  std::vector<float> out(3 * 64);
  EXPECT_THROW(preprocess_image({px.data(), 4, 4, 1}, p, out.data(), "x"), InputError);
  p.grayscale_to_rgb = true;
  EXPECT_THROW(preprocess_image({px.data(), 2, 2, 4}, p, out.data(), "x"), InputError);
  EXPECT_THROW(preprocess_image({px.data(), 0, 4, 1}, p, out.data(), "x"), InputError);
  EXPECT_THROW(preprocess_image({nullptr, 4, 4, 1}, p, out.data(), "x"), InputError);
  EXPECT_NO_THROW(preprocess_image({px.data(), 4, 4, 1}, p, out.data(), "x"));
}

}  // namespace
}  // namespace fednode
