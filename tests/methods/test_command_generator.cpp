// FGL's external generator (methods/fgl/command_generator.h) through the node's own host
// (node/local_host.h): real commands run by /bin/sh, and
// every way they can break the contract -- a failing exit, too few or too many images, a file
// that is not an image, images of different sizes -- gives an error naming the command, the
// request and the file, with the end of the command's log.
#include "methods/fgl/command_generator.h"
#include "node/local_host.h"
#include "../common/temp_dir.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fednode {
namespace {

const std::string kImages = std::string(FEDNODE_SOURCE_DIR) + "/tests/features/data/images";

std::shared_ptr<const Generator> command_generator(const std::string& command) {
  return make_command_generator(command, local_host());
}

std::vector<GenerationRequest> two_requests() {
  GenerationRequest a;
  a.label = 4;
  a.name = "Coat";
  a.prompt = "Coat, real world images, \"high\" resolution";
  a.negative_prompt = "low quality";
  a.count = 2;
  GenerationRequest b = a;
  b.label = 9;
  b.name = "Ankle boot";
  b.caption = "a brown boot";
  b.count = 1;
  return {a, b};
}

// The generator's work folders go where TMPDIR says: a failing command's is kept for its user
// to read, so the tests point TMPDIR into a folder of their own, removed after.
class PrivateTmpdir {
 public:
  PrivateTmpdir() : dir_("fednode_generator_test") {
    const char* old = std::getenv("TMPDIR");
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv("TMPDIR", dir_.str().c_str(), 1);
  }
  ~PrivateTmpdir() {
    if (had_)
      ::setenv("TMPDIR", old_.c_str(), 1);
    else
      ::unsetenv("TMPDIR");
  }
  const test::TempDir& dir() const { return dir_; }

 private:
  test::TempDir dir_;
  bool had_ = false;
  std::string old_;
};

std::string error_of(const std::string& command) {
  const PrivateTmpdir tmp;
  try {
    command_generator(command)->generate(two_requests(), 5, nullptr);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// A square gray PNG for the scripts to copy: the fixture folders hold none of the right shape.
// It lives in a folder of its own, removed when the test program ends.
std::string square_png() {
  static const test::TempDir dir("fednode_square");
  static const std::string path = [] {
    const std::string p = dir / "square.png";
    // 2 x 2 gray, 8-bit: pixels 0, 64, 128, 255.
    const unsigned char bytes[] = {
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00,
        0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, 0x00, 0x00, 0x00, 0x57, 0xdd, 0x52, 0xf8, 0x00, 0x00, 0x00,
        0x0e, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x60, 0x70, 0x60, 0x68, 0xf8, 0x0f, 0x00, 0x03, 0x05, 0x01,
        0xc0, 0x53, 0x5b, 0x15, 0x9f, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes), sizeof bytes);
    return p;
  }();
  return path;
}

// The shell's part of a command: $1 is the prompts file, $2 the images folder.
std::string script(const std::string& body) { return "sh -c '" + body + "' fednode-test"; }

TEST(CommandGenerator, ReadsWhatAWellBehavedCommandWrites) {
  const std::string png = square_png();
  const test::TempDir seen_dir("fednode_prompts");
  const std::string seen_file = seen_dir / "seen.jsonl";
  const auto g = command_generator(script("mkdir -p $2/0 $2/1 && cp " + png + " $2/0/b.png && cp " + png +
                                               " $2/0/a.png && cp " + png + " $2/1/x.png && cp $1 " + seen_file));
  const ImageBatch s = g->generate(two_requests(), 5, nullptr);
  ASSERT_EQ(s.pixels.rows(), 3);
  EXPECT_EQ(s.size, 2);
  EXPECT_EQ(s.channels, 1);
  EXPECT_EQ(s.labels, (Labels{4, 4, 9}));
  EXPECT_FLOAT_EQ(s.pixels(0, 1), 64.0f / 255.0f);
  EXPECT_FLOAT_EQ(s.pixels(2, 3), 1.0f);
  // The prompts as the contract writes them: one JSON object a line, strings escaped.
  std::ifstream seen(seen_file);
  std::string first, second;
  std::getline(seen, first);
  std::getline(seen, second);
  EXPECT_NE(first.find("\"index\": 0, \"label\": 4, \"name\": \"Coat\""), std::string::npos) << first;
  EXPECT_NE(first.find("\\\"high\\\" resolution"), std::string::npos) << first;
  EXPECT_EQ(first.find("caption"), std::string::npos) << first;
  EXPECT_NE(second.find("\"caption\": \"a brown boot\", \"count\": 1, \"seed\": "), std::string::npos) << second;
}

TEST(CommandGenerator, AFailingCommandIsQuotedWithItsLog) {
  const std::string e = error_of(script("echo starting; echo no GPU found >&2; exit 3"));
  EXPECT_NE(e.find("exited with status 3"), std::string::npos) << e;
  EXPECT_NE(e.find("no GPU found"), std::string::npos) << e;
  {  // the log the error names is kept for its reader
    const PrivateTmpdir tmp;
    std::string kept;
    try {
      command_generator(script("echo no GPU found; exit 3"))->generate(two_requests(), 5, nullptr);
    } catch (const InputError& e) {
      const std::string what = e.what(), mark = "the end of its log ";
      const size_t at = what.find(mark);
      ASSERT_NE(at, std::string::npos) << what;
      kept = what.substr(at + mark.size(), what.find(':', at + mark.size()) - at - mark.size());
    }
    EXPECT_EQ(kept.rfind(tmp.dir().str(), 0), 0u) << kept;
    std::ifstream log(kept);
    std::string line;
    EXPECT_TRUE(std::getline(log, line)) << kept;
    EXPECT_EQ(line, "no GPU found");
  }
  EXPECT_NE(error_of("/nonexistent/generator").find("exited with status 127"), std::string::npos);
}

TEST(CommandGenerator, WrongCountsNameTheRequest) {
  const std::string png = square_png();
  std::string e = error_of(script("mkdir -p $2/0 $2/1 && cp " + png + " $2/0/a.png && cp " + png + " $2/1/a.png"));
  EXPECT_NE(e.find("request 0 (Coat): wrote 1 files"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 2"), std::string::npos) << e;
  e = error_of(script("mkdir -p $2/0 && cp " + png + " $2/0/a.png && cp " + png + " $2/0/b.png"));
  EXPECT_NE(e.find("request 1 (Ankle boot): wrote 0 files"), std::string::npos) << e;
}

TEST(CommandGenerator, WhatIsNotASquareImageOfOneSizeIsNamed) {
  const std::string png = square_png();
  std::string e = error_of(script("mkdir -p $2/0 $2/1 && echo hello > $2/0/a.png && cp " + png + " $2/0/b.png && cp " +
                                  png + " $2/1/a.png"));
  EXPECT_NE(e.find("0/a.png"), std::string::npos) << e;
  e = error_of(script("mkdir -p $2/0 $2/1 && cp " + kImages + "/cat/a_rgb.png $2/0/a.png && cp " + png +
                      " $2/0/b.png && cp " + png + " $2/1/a.png"));
  EXPECT_NE(e.find("must be square"), std::string::npos) << e;
  e = error_of(script("mkdir -p $2/0 $2/1 && cp " + png + " $2/0/a.png && cp " + png + " $2/0/b.png && cp " + kImages +
                      "/cat/b_rgba.png $2/1/a.png"));
  EXPECT_NE(e.find("1/a.png"), std::string::npos) << e;
}

TEST(CommandGenerator, AnEmptyCommandIsRefused) { EXPECT_THROW(make_command_generator("  ", local_host()), InputError); }

}  // namespace
}  // namespace fednode
