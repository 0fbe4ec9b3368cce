// PNG and JPEG decoding and the class-folder layout, on the fixtures in tests/features/data/images
// (written by data/make_images.py from the pixel formulas repeated here).
#include "features/images.h"
#include "core/rng.h"

#include "../common/expect_error.h"
#include "../common/temp_dir.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <jpeglib.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace fednode {
namespace {

using test::TempDir;

const std::string kImages = std::string(FEDNODE_SOURCE_DIR) + "/tests/features/data/images";

int pattern(int x, int y, int c) {
  switch (c) {
    case 0: return (x * 17 + y * 5) % 256;
    case 1: return (x * 3 + y * 29 + 40) % 256;
    default: return (x * y * 7 + 11) % 256;
  }
}

int smooth(int x, int y, int c) { return c == 0 ? x * 10 : c == 1 ? y * 12 : 128; }

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void expect_error(const std::string& path, const std::string& fragment) {
  test::expect_input_error([&] { read_image(path); }, {fragment, path});
}

TEST(Images, PngRgbDecodesExactly) {
  const Image img = read_image(kImages + "/cat/a_rgb.png");
  ASSERT_EQ(img.width, 20);
  ASSERT_EQ(img.height, 14);
  ASSERT_EQ(img.channels, 3);
  for (int y = 0; y < 14; ++y)
    for (int x = 0; x < 20; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(img.pixels[(y * 20 + x) * 3 + c], pattern(x, y, c)) << x << "," << y;
}

TEST(Images, PngAlphaIsDroppedNotComposited) {
  const Image img = read_image(kImages + "/cat/b_rgba.png");
  ASSERT_EQ(img.channels, 3);
  ASSERT_EQ(img.width, 6);
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 6; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(img.pixels[(y * 6 + x) * 3 + c], pattern(x, y, c));
}

TEST(Images, PngGrayStaysOneChannel) {
  const Image img = read_image(kImages + "/dog/a_gray.png");
  ASSERT_EQ(img.channels, 1);
  ASSERT_EQ(img.width, 9);
  ASSERT_EQ(img.height, 11);
  for (int y = 0; y < 11; ++y)
    for (int x = 0; x < 9; ++x) ASSERT_EQ(img.pixels[y * 9 + x], pattern(x, y, 0));
}

TEST(Images, JpegDecodesCloseToTheSource) {
  const Image rgb = read_image(kImages + "/cat/c_smooth.jpg");
  ASSERT_EQ(rgb.channels, 3);
  ASSERT_EQ(rgb.width, 16);
  ASSERT_EQ(rgb.height, 12);
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 16; ++x)
      for (int c = 0; c < 3; ++c) EXPECT_NEAR(rgb.pixels[(y * 16 + x) * 3 + c], smooth(x, y, c), 8);
  const Image gray = read_image(kImages + "/dog/b_gray.JPEG");
  ASSERT_EQ(gray.channels, 1);
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 16; ++x) EXPECT_NEAR(gray.pixels[y * 16 + x], smooth(x, y, 0), 8);
}

TEST(Images, RejectsBrokenFilesWithTheirPath) {
  const TempDir dir_tmp("fednode_images_broken");
  const std::string dir = dir_tmp.str();
  write_bytes(dir + "/text.png", {'h', 'e', 'l', 'l', 'o'});
  expect_error(dir + "/text.png", "not a PNG or JPEG");

  std::vector<uint8_t> png = read_bytes(kImages + "/cat/a_rgb.png");
  png.resize(png.size() / 2);
  write_bytes(dir + "/half.png", png);
  expect_error(dir + "/half.png", "invalid PNG");

  std::vector<uint8_t> jpg = read_bytes(kImages + "/cat/c_smooth.jpg");
  std::vector<uint8_t> cut(jpg.begin(), jpg.end() - 40);  // inside the entropy-coded data
  write_bytes(dir + "/cut.jpg", cut);
  expect_error(dir + "/cut.jpg", "truncated");

  std::vector<uint8_t> header_only(jpg.begin(), jpg.begin() + 4);
  write_bytes(dir + "/header.jpg", header_only);
  expect_error(dir + "/header.jpg", "invalid JPEG");

  // A PNG header claiming 100000 x 100000 pixels must be refused before any allocation.
  std::vector<uint8_t> huge = read_bytes(kImages + "/cat/a_rgb.png");
  huge[16] = 0; huge[17] = 1; huge[18] = 0x86; huge[19] = 0xA0;  // width 100000
  huge[20] = 0; huge[21] = 1; huge[22] = 0x86; huge[23] = 0xA0;  // height 100000
  write_bytes(dir + "/huge.png", huge);
  EXPECT_THROW(read_image(dir + "/huge.png"), InputError);

  expect_error(dir + "/missing.png", "cannot read");
}

TEST(Images, ADecodedImageHoldsItsPixelShareUntilItIsGone) {
  const int64_t before = pixels_in_flight();
  {
    const Image a = read_image(kImages + "/cat/a_rgb.png");
    const Image b = read_image(kImages + "/cat/c_smooth.jpg");  // the same thread holds two
    EXPECT_EQ(pixels_in_flight() - before, int64_t{a.width} * a.height + int64_t{b.width} * b.height);
    const Image copy = a;
    EXPECT_EQ(pixels_in_flight() - before, int64_t{a.width} * a.height + int64_t{b.width} * b.height);
  }
  EXPECT_EQ(pixels_in_flight(), before);
  const TempDir dir("fednode_images_share");
  std::vector<uint8_t> jpg = read_bytes(kImages + "/cat/c_smooth.jpg");
  jpg.resize(jpg.size() - 40);  // inside the entropy-coded data: fails after the header
  write_bytes(dir.str() + "/cut.jpg", jpg);
  EXPECT_THROW(read_image(dir.str() + "/cut.jpg"), InputError);
  EXPECT_EQ(pixels_in_flight(), before) << "a failed decode gives its share back";
}

// A small progressive JPEG whose frame header claims 65500 x 65500 pixels: libjpeg would read
// the whole image into coefficient buffers of that size (13 GB) as decompression starts, so the
// claim must be refused from the header alone.
TEST(Images, AProgressiveJpegsHeaderIsCheckedBeforeDecompression) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = c.image_height = 32;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row(32 * 3, 128);
  while (c.next_scanline < c.image_height) {
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<uint8_t> jpg(mem, mem + size);
  jpeg_destroy_compress(&c);
  std::free(mem);
  size_t sof = 0;
  for (size_t i = 0; i + 1 < jpg.size(); ++i)
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xC2) sof = i;
  ASSERT_GT(sof, 0u) << "not progressive";
  for (size_t at : {sof + 5, sof + 7}) jpg[at] = 0xFF, jpg[at + 1] = 0xDC;  // height, width = 65500
  const TempDir dir("fednode_images_progressive");
  write_bytes(dir.str() + "/bomb.jpg", jpg);
  expect_error(dir.str() + "/bomb.jpg", "its header claims more pixels than the 67108864");
}

// Seeded corruption of every fixture: flipped bytes anywhere (header, chunk lengths, CRCs,
// Huffman tables, entropy-coded data) and truncation. Each file must decode to a consistent
// image or be refused with an InputError naming it; nothing else may happen.
TEST(Images, SurvivesRandomCorruption) {
  const std::vector<std::string> fixtures = {"cat/a_rgb.png", "cat/b_rgba.png", "cat/c_smooth.jpg",
                                             "dog/a_gray.png", "dog/b_gray.JPEG"};
  uint64_t state = 2026;
  int decoded = 0, rejected = 0;
  for (const std::string& name : fixtures) {
    const std::vector<uint8_t> good = read_bytes(kImages + "/" + name);
    ASSERT_GT(good.size(), 64u) << name;
    for (int trial = 0; trial < 150; ++trial) {
      std::vector<uint8_t> bytes = good;
      const uint64_t r = splitmix64(state);
      for (uint64_t flips = 1 + r % 4, k = 0; k < flips; ++k) {
        const uint64_t at = splitmix64(state);
        bytes[at % bytes.size()] ^= static_cast<uint8_t>(1 + (at >> 32) % 255);
      }
      if ((r >> 8) % 4 == 0) bytes.resize((r >> 16) % bytes.size());
      const std::string where = name + " (trial " + std::to_string(trial) + ")";
      try {
        const Image im = decode_image(bytes, where);
        EXPECT_TRUE(im.channels == 1 || im.channels == 3) << where;
        EXPECT_GT(im.width, 0) << where;
        EXPECT_GT(im.height, 0) << where;
        EXPECT_LE(int64_t{im.width} * im.height, kMaxImagePixels) << where;
        EXPECT_EQ(im.pixels.size(), size_t(im.width) * im.height * im.channels) << where;
        ++decoded;
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
        ++rejected;
      }
    }
  }
  // Both outcomes occur: JPEG decoders tolerate damaged entropy-coded data, PNG's CRCs do not.
  EXPECT_GT(decoded, 0);
  EXPECT_GT(rejected, 300);
}

TEST(Images, AnEmptyFileIsNamedAsSuch) {
  const TempDir dir_tmp("fednode_images_empty_file");
  write_bytes(dir_tmp.str() + "/empty.png", {});
  expect_error(dir_tmp.str() + "/empty.png", "empty file");
}

// libjpeg hands CMYK back as CMYK; fednode turns it into RGB by PIL's formula on Adobe's inverted
// samples: R = k - round((255 - c) k / 255) for decoded samples c and k.
TEST(Images, ACmykJpegBecomesRgbByPilsFormula) {
  const TempDir dir_tmp("fednode_images_cmyk");
  const std::string path = dir_tmp.str() + "/cmyk.jpg";
  const int w = 16, h = 8;
  const uint8_t sample[4] = {245, 55, 225, 215};  // uniform, so the JPEG round trip is near-exact
  std::vector<uint8_t> pixels(static_cast<size_t>(w) * h * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = sample[i % 4];
  {
    jpeg_compress_struct cinfo;
    jpeg_error_mgr jerr;
    cinfo.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&cinfo);
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    jpeg_stdio_dest(&cinfo, f);
    cinfo.image_width = w;
    cinfo.image_height = h;
    cinfo.input_components = 4;
    cinfo.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, 100, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
      JSAMPROW row = pixels.data() + static_cast<size_t>(cinfo.next_scanline) * w * 4;
      jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    std::fclose(f);
  }
  const Image img = read_image(path);
  ASSERT_EQ(img.channels, 3);
  ASSERT_EQ(img.width, w);
  ASSERT_EQ(img.height, h);
  const int k = sample[3];
  for (int c = 0; c < 3; ++c) {
    const int t = (255 - sample[c]) * k + 128;
    const int expected = k - (((t >> 8) + t) >> 8);
    for (int i = 0; i < w * h; ++i) EXPECT_NEAR(img.pixels[static_cast<size_t>(i) * 3 + c], expected, 2) << c;
  }
}

// torchvision's ImageFolder walks a class's sub-folders; so does fednode, in the same order
// (folders by path, then files by name): "c/a b/x.png" after "c/b.png", though it sorts first as
// a plain string. Files that are not images are listed, not dropped in silence.
TEST(ImageFolder, WalksSubFoldersInTorchvisionsOrderAndListsWhatItIgnores) {
  const TempDir tmp("fednode_images_nested");
  const std::string root = tmp.str();
  const std::string png = kImages + "/cat/a_rgb.png";
  for (const char* dir : {"c/a b", "c/sub/deep", "c/sub2", "c/.hidden", "d/only"}) fs::create_directories(root + "/" + dir);
  for (const char* file : {"c/b.png", "c/a b/x.png", "c/sub/a.png", "c/sub/deep/z.JPG", "c/sub2/a.png",
                           "c/.hidden/h.png", "d/only/n.png"})
    fs::copy_file(png, root + "/" + file);
  write_bytes(root + "/c/readme.txt", {'x'});
  write_bytes(root + "/c/sub/notes.md", {'x'});
  const ImageFolder f = scan_image_folder(root);
  EXPECT_EQ(f.class_names, (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(f.files, (std::vector<std::string>{"c/b.png", "c/a b/x.png", "c/sub/a.png", "c/sub/deep/z.JPG",
                                               "c/sub2/a.png", "d/only/n.png"}));
  EXPECT_EQ(f.labels, (Labels{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(f.ignored, (std::vector<std::string>{"c/readme.txt", "c/sub/notes.md"}));
  // A link back up the tree is walked once, not forever.
  fs::create_directory_symlink(root + "/c", root + "/c/sub2/loop");
  EXPECT_EQ(scan_image_folder(root).files.size(), 6u);
}

TEST(ImageFolder, ListsClassesAndImagesInOrderSkippingTheRest) {
  const ImageFolder f = scan_image_folder(kImages);
  EXPECT_EQ(f.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(f.files, (std::vector<std::string>{"cat/a_rgb.png", "cat/b_rgba.png", "cat/c_smooth.jpg",
                                               "dog/a_gray.png", "dog/b_gray.JPEG"}));
  EXPECT_EQ(f.labels, (Labels{0, 0, 0, 1, 1}));
  EXPECT_EQ(f.ignored, (std::vector<std::string>{"dog/readme.txt"}));
}

TEST(ImageFolder, LimitTakesRoundRobinOverClasses) {
  const ImageFolder three = scan_image_folder(kImages, 3);
  EXPECT_EQ(three.files, (std::vector<std::string>{"cat/a_rgb.png", "cat/b_rgba.png", "dog/a_gray.png"}));
  EXPECT_EQ(three.labels, (Labels{0, 0, 1}));
  const ImageFolder one = scan_image_folder(kImages, 1);
  EXPECT_EQ(one.files, (std::vector<std::string>{"cat/a_rgb.png"}));
  EXPECT_EQ(scan_image_folder(kImages, 100).files.size(), 5u);
}

TEST(ImageFolder, RejectsBadLayouts) {
  EXPECT_THROW(scan_image_folder("/nonexistent/folder"), InputError);
  const TempDir empty_tmp("fednode_images_empty");
  const std::string empty = empty_tmp.str();
  EXPECT_THROW(scan_image_folder(empty), InputError);
  const TempDir no_images_tmp("fednode_images_no_images");
  const std::string no_images = no_images_tmp.str();
  fs::create_directories(no_images + "/cls");
  write_bytes(no_images + "/cls/readme.txt", {'x'});
  test::expect_input_error([&] { scan_image_folder(no_images); }, {"cls"});
  // Hidden entries are not classes or images.
  const TempDir hidden_tmp("fednode_images_hidden");
  const std::string hidden = hidden_tmp.str();
  fs::create_directories(hidden + "/a");
  fs::create_directories(hidden + "/.cache");
  fs::copy_file(kImages + "/cat/a_rgb.png", hidden + "/a/x.png");
  fs::copy_file(kImages + "/cat/a_rgb.png", hidden + "/a/.y.png");
  const ImageFolder f = scan_image_folder(hidden);
  EXPECT_EQ(f.class_names, (std::vector<std::string>{"a"}));
  EXPECT_EQ(f.files, (std::vector<std::string>{"a/x.png"}));
}

}  // namespace
}  // namespace fednode
