#include "features/npy.h"

#include "core/float16.h"
#include "core/rng.h"

#include "../common/expect_error.h"
#include "../common/temp_dir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using namespace fednode;
using fednode::test::expect_input_error;
using fednode::test::TempDir;

namespace {

const std::string kFixtures = std::string(FEDNODE_SOURCE_DIR) + "/tests/features/data/npy/";

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A version 1.0 file with the given header text (padded as numpy does) and raw data.
std::string npy_v1(const std::string& dict, const std::string& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xFF));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + data;
}

std::string floats_le(std::initializer_list<float> values) {
  std::string out;
  for (float f : values) out.append(reinterpret_cast<const char*>(&f), 4);
  return out;
}

MatrixF expected_x() {
  MatrixF X(3, 4);
  for (int i = 0; i < 12; ++i) X(i / 4, i % 4) = (static_cast<float>(i) - 5.0f) / 4.0f;
  return X;
}

bool numpy_available() {
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

}  // namespace

TEST(Npy, ReadsEveryFloatLayoutNumpyWrites) {
  const MatrixF want = expected_x();
  for (const char* name : {"x_le_f2.npy", "x_le_f4.npy", "x_le_f8.npy", "x_be_f2.npy", "x_be_f4.npy",
                           "x_be_f8.npy", "x_fortran_f4.npy", "x_fortran_be_f2.npy", "x_v2.npy",
                           "x_v3.npy"}) {
    SCOPED_TRACE(name);
    const MatrixF X = read_npy_features(kFixtures + name);
    ASSERT_EQ(X.rows(), 3);
    ASSERT_EQ(X.cols(), 4);
    EXPECT_EQ(X, want);
  }
  const MatrixF empty = read_npy_features(kFixtures + "x_empty.npy");
  EXPECT_EQ(empty.rows(), 0);
  EXPECT_EQ(empty.cols(), 5);
}

TEST(Npy, ReadsEveryIntegerLabelType) {
  const Labels want = {0, 3, 1, 2, 3, 0, 1};
  for (const char* order : {"le", "be"})
    for (const char* kind : {"i", "u"})
      for (int size : {1, 2, 4, 8}) {
        const std::string name =
            std::string("y_") + order + "_" + kind + std::to_string(size) + ".npy";
        SCOPED_TRACE(name);
        EXPECT_EQ(read_npy_labels(kFixtures + name), want);
      }
  EXPECT_EQ(read_npy_labels(kFixtures + "y_column.npy"), want);
}

TEST(Npy, RoundTripFloat32AndFloat16) {
  TempDir dir;
  MatrixF X(5, 3);
  for (int i = 0; i < 15; ++i) X(i / 3, i % 3) = std::sin(static_cast<float>(i)) * 100.0f + 0.1234567f;
  write_npy_features(dir / "x.npy", X);
  EXPECT_EQ(read_npy_features(dir / "x.npy"), X);
  // numpy's writers align the data to 64 bytes; so do we.
  EXPECT_EQ((read_bytes(dir / "x.npy").size() - 15 * 4) % 64, 0u);

  write_npy_features(dir / "h.npy", X, NpyFloat::Float16);
  const MatrixF H = read_npy_features(dir / "h.npy");
  for (int i = 0; i < 15; ++i)
    EXPECT_EQ(H(i / 3, i % 3), round_to_half(X(i / 3, i % 3)));
  EXPECT_EQ(read_bytes(dir / "h.npy").size(), read_bytes(dir / "x.npy").size() - 30);

  const Labels y = {4, 0, 2, 2, 1};
  write_npy_labels(dir / "y.npy", y);
  EXPECT_EQ(read_npy_labels(dir / "y.npy"), y);

  const Features f = load_npy_dataset(dir / "x.npy", dir / "y.npy");
  EXPECT_EQ(f.num_classes, 5);
  EXPECT_EQ(f.X, X);
  EXPECT_EQ(load_npy_dataset(dir / "x.npy", dir / "y.npy", 7).num_classes, 7);
  EXPECT_FALSE(fs::exists(dir / "x.npy.tmp"));

  MatrixF none(0, 8);
  write_npy_features(dir / "none.npy", none);
  EXPECT_EQ(read_npy_features(dir / "none.npy").cols(), 8);
}

TEST(Npy, Float16WriteRejectsOverflow) {
  TempDir dir;
  MatrixF X = MatrixF::Zero(2, 2);
  X(1, 0) = 70000.0f;
  expect_input_error([&] { write_npy_features(dir / "h.npy", X, NpyFloat::Float16); },
                     {"h.npy", "row 1, column 0", "overflows float16"});
  EXPECT_FALSE(fs::exists(dir / "h.npy"));
}

TEST(Npy, NumpyReadsWhatWeWrite) {
  if (!numpy_available()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  TempDir dir;
  MatrixF X(2, 3);
  X << 1.5f, -2.25f, 3.0f, 0.0f, 1e-3f, -7.0f;
  write_npy_features(dir / "x.npy", X);
  write_npy_features(dir / "h.npy", X, NpyFloat::Float16);
  write_npy_labels(dir / "y.npy", {3, 0});
  const std::string script =
      "import numpy as np, sys\n"
      "d = sys.argv[1]\n"
      "x = np.load(d + '/x.npy'); h = np.load(d + '/h.npy'); y = np.load(d + '/y.npy')\n"
      "ref = np.array([[1.5, -2.25, 3.0], [0.0, 1e-3, -7.0]], dtype=np.float32)\n"
      "assert x.dtype == np.float32 and x.shape == (2, 3) and (x == ref).all(), x\n"
      "assert h.dtype == np.float16 and (h == ref.astype(np.float16)).all(), h\n"
      "assert y.dtype == np.int32 and y.tolist() == [3, 0], y\n";
  write_bytes(dir / "check.py", script);
  const std::string cmd = "/usr/bin/python3 " + (dir / "check.py") + " " + dir.str();
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(Npy, RejectsNonFiniteWithRowAndColumn) {
  expect_input_error([] { read_npy_features(kFixtures + "x_nan.npy"); },
                     {"x_nan.npy", "non-finite", "row 1, column 2"});
  // Fortran order: the error must still name the logical row and column.
  expect_input_error([] { read_npy_features(kFixtures + "x_inf_fortran.npy"); },
                     {"non-finite", "row 2, column 1"});
  expect_input_error([] { read_npy_features(kFixtures + "x_f8_overflow.npy"); },
                     {"row 1, column 1", "too large for float32"});
}

TEST(Npy, RejectsWrongRankAndDtype) {
  expect_input_error([] { read_npy_features(kFixtures + "x_rank3.npy"); },
                     {"x_rank3.npy", "rank 2", "(2, 3, 4)"});
  expect_input_error([] { read_npy_features(kFixtures + "x_int.npy"); }, {"float", "'<i4'"});
  expect_input_error([] { read_npy_features(kFixtures + "x_complex.npy"); },
                     {"unsupported dtype '<c8'"});
  expect_input_error([] { read_npy_features(kFixtures + "x_structured.npy"); },
                     {"structured"});
  expect_input_error([] { read_npy_labels(kFixtures + "y_float.npy"); }, {"integer dtype"});
  expect_input_error([] { read_npy_labels(kFixtures + "x_le_f4.npy"); }, {"integer dtype"});
  expect_input_error([] { read_npy_labels(kFixtures + "x_int.npy"); }, {"shape (n,)", "(2, 3)"});
}

TEST(Npy, RejectsBadLabels) {
  expect_input_error([] { read_npy_labels(kFixtures + "y_negative.npy"); },
                     {"y_negative.npy", "negative label -2", "index 2"});
  TempDir dir;
  std::string big;
  for (uint64_t v : {1ULL, 1ULL << 40}) big.append(reinterpret_cast<const char*>(&v), 8);
  write_bytes(dir / "big.npy",
              npy_v1("{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", big));
  expect_input_error([&] { read_npy_labels(dir / "big.npy"); }, {"index 1", "too large"});
  // Beyond int64: must not wrap to a negative or small label.
  write_bytes(dir / "huge.npy", npy_v1("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }",
                                           std::string(8, '\xFF')));
  expect_input_error([&] { read_npy_labels(dir / "huge.npy"); }, {"too large"});

  write_npy_features(dir / "x.npy", MatrixF::Zero(4, 2));
  write_npy_labels(dir / "y.npy", {0, 1, 5, 1});
  expect_input_error([&] { load_npy_dataset(dir / "x.npy", dir / "y.npy", 3); },
                     {"y.npy", "label 5", "index 2", "(3)"});
  write_npy_labels(dir / "y_edge.npy", {0, 1, 3, 1});  // labels run from 0 to num_classes - 1
  expect_input_error([&] { load_npy_dataset(dir / "x.npy", dir / "y_edge.npy", 3); }, {"label 3", "index 2"});
  write_npy_labels(dir / "y3.npy", {0, 1, 1});
  expect_input_error([&] { load_npy_dataset(dir / "x.npy", dir / "y3.npy"); },
                     {"4 rows", "3 labels"});
  write_npy_features(dir / "x0.npy", MatrixF::Zero(0, 2));
  write_npy_labels(dir / "y0.npy", {});
  expect_input_error([&] { load_npy_dataset(dir / "x0.npy", dir / "y0.npy"); },
                     {"cannot be inferred"});
  write_npy_labels(dir / "yfar.npy", {0, 1, 2000000000, 1});
  expect_input_error([&] { load_npy_dataset(dir / "x.npy", dir / "yfar.npy"); },
                     {"2000000000", "classes"});
  expect_input_error([&] { load_npy_dataset(dir / "x.npy", dir / "y.npy", -1); },
                     {"number of classes"});
}

TEST(Npy, RejectsMalformedContainers) {
  TempDir dir;
  const std::string good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }";
  const std::string data = floats_le({1.0f, 2.0f});
  write_bytes(dir / "ok.npy", npy_v1(good_dict, data));
  EXPECT_EQ(read_npy_features(dir / "ok.npy"), (MatrixF(1, 2) << 1.0f, 2.0f).finished());

  struct Case {
    const char* name;
    std::string bytes;
    std::vector<std::string> fragments;
  };
  const std::string good = npy_v1(good_dict, data);
  std::string with_nul = good_dict;
  with_nul[16] = '\0';  // right after the descr entry's comma
  std::string bad_version = good;
  bad_version[6] = 4;
  std::string huge_len("\x93NUMPY\x02\x00", 8);
  huge_len += std::string("\xFF\xFF\xFF\x7F", 4) + "{}";
  const std::vector<Case> cases = {
      {"empty.npy", "", {"too short"}},
      {"magic.npy", "\x93NUMPZ" + good.substr(6), {"bad magic"}},
      {"pickle.npy", "\x80\x04\x95" + std::string(40, 'x'), {"bad magic"}},
      {"version.npy", bad_version, {"format version 4.0"}},
      {"trunc_header.npy", good.substr(0, 40), {"truncated header"}},
      {"huge_header.npy", huge_len, {"header length", "exceeds"}},
      {"trunc_data.npy", good.substr(0, good.size() - 3), {"truncated data", "needs 8 bytes", "has 5"}},
      {"extra_data.npy", good + "xyz", {"3 unexpected bytes"}},
      {"huge_shape.npy",
       npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }", data),
       {"truncated data", "2^60"}},
      {"big_shape.npy",
       npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000, 100000), }", data),
       {"truncated data", "40000000000000 bytes"}},
      {"not_dict.npy", npy_v1("['descr', '<f4']", data), {"not a dictionary"}},
      {"missing_key.npy", npy_v1("{'descr': '<f4', 'shape': (1, 2)}", data), {"missing key 'fortran_order'"}},
      {"extra_key.npy", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), 'x': 1}", data),
       {"unexpected key 'x'"}},
      {"dup_key.npy", npy_v1("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1, 2)}", data),
       {"duplicate key"}},
      {"unterminated.npy", npy_v1("{'descr': '<f4, 'fortran_order': False, 'shape': (1, 2)}", data),
       {"malformed .npy header"}},
      {"no_close.npy", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2)", data),
       {"malformed .npy header", "unexpected end"}},
      {"garbage.npy", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2)} x", data),
       {"after the dictionary"}},
      {"fortran_str.npy", npy_v1("{'descr': '<f4', 'fortran_order': 'no', 'shape': (1, 2)}", data),
       {"fortran_order must be True or False"}},
      {"shape_neg.npy", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2)}", data),
       {"non-negative"}},
      {"shape_str.npy", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': '1,2'}", data),
       {"shape must be a tuple"}},
      {"deep.npy", npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((1))))))))))}", data),
       {"nesting too deep"}},
      {"order.npy", npy_v1("{'descr': '!f4', 'fortran_order': False, 'shape': (1, 2)}", data),
       {"unknown byte order '!'"}},
      {"pipe.npy", npy_v1("{'descr': '|f4', 'fortran_order': False, 'shape': (1, 2)}", data),
       {"'|' is only valid"}},
      {"size.npy", npy_v1("{'descr': '<f3', 'fortran_order': False, 'shape': (1, 2)}", data),
       {"element size"}},
      {"object.npy", npy_v1("{'descr': '|O', 'fortran_order': False, 'shape': (1, 2)}", data),
       {"unsupported dtype '|O'"}},
      {"nul.npy", npy_v1(with_nul, data),
       {"NUL"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    write_bytes(dir / c.name, c.bytes);
    expect_input_error([&] { read_npy_features(dir / c.name); }, c.fragments);
    // Every error names the file.
    expect_input_error([&] { read_npy_features(dir / c.name); }, {c.name});
  }
  expect_input_error([] { read_npy_features("/nonexistent/x.npy"); }, {"/nonexistent/x.npy", "no such .npy file"});
  expect_input_error([] { read_npy_features("/tmp"); }, {"/tmp is a directory, not a .npy file"});
}

TEST(Npy, AcceptsHeaderVariants) {
  TempDir dir;
  const std::string data = floats_le({1.0f, 2.0f});
  const MatrixF want = (MatrixF(1, 2) << 1.0f, 2.0f).finished();
  for (const char* dict :
       {"{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(1,2)}",
        "{ 'shape' : ( 1 , 2 , ) , 'fortran_order' : False , 'descr' : '<f4' , }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1L, 2L)}",
        "{'descr': '=f4', 'fortran_order': False, 'shape': [1, 2]}"}) {
    SCOPED_TRACE(dict);
    write_bytes(dir / "v.npy", npy_v1(dict, data));
    EXPECT_EQ(read_npy_features(dir / "v.npy"), want);
  }
  // Rank 1 labels with a one-element tuple, and the 1-byte '|' byte order.
  write_bytes(dir / "l.npy", npy_v1("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }",
                                        std::string("\x02\x00\x01", 3)));
  EXPECT_EQ(read_npy_labels(dir / "l.npy"), (Labels{2, 0, 1}));
}

// Random byte damage must end in a clean result or an InputError, never a crash or a huge
// allocation (run under ASan to make this bite).
TEST(Npy, SurvivesRandomCorruption) {
  TempDir dir;
  const std::string x = read_bytes(kFixtures + "x_fortran_be_f2.npy");
  const std::string y = read_bytes(kFixtures + "y_be_u8.npy");
  Rng rng(2024);
  int rejected = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const bool labels = trial % 2 == 1;
    std::string bytes = labels ? y : x;
    const int edits = 1 + static_cast<int>(rng.below(4));
    for (int e = 0; e < edits; ++e) {
      // Mostly the header, where the parser lives.
      const size_t limit = rng.below(4) == 0 ? bytes.size() : std::min<size_t>(bytes.size(), 128);
      bytes[rng.below(limit)] = static_cast<char>(rng.below(256));
    }
    if (rng.below(5) == 0) bytes.resize(rng.below(bytes.size()));
    write_bytes(dir / "c.npy", bytes);
    try {
      if (labels)
        read_npy_labels(dir / "c.npy");
      else
        read_npy_features(dir / "c.npy");
    } catch (const InputError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 40);
}
