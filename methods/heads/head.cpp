#include "methods/heads/head.h"

#include "methods/registry.h"
#include "methods/heads/head_format.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <istream>
#include <ostream>

namespace fednode {
namespace head_format {

// Heads are small; anything larger than this in a file is corruption, not a model.
constexpr uint64_t kMaxHeadScalars = uint64_t{1} << 28;

void write_u64(std::ostream& out, uint64_t v) { out.write(reinterpret_cast<const char*>(&v), 8); }

uint64_t read_u64(std::istream& in, const std::string& where) {
  uint64_t v = 0;
  if (!in.read(reinterpret_cast<char*>(&v), 8)) throw InputError(where + ": truncated head file");
  return v;
}

void write_string(std::ostream& out, const std::string& s) {
  write_u64(out, s.size());
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

std::string read_string(std::istream& in, const std::string& where) {
  const uint64_t n = read_u64(in, where);
  if (n > 64) throw InputError(where + ": a string of " + std::to_string(n) + " bytes (at most 64)");
  std::string s(n, '\0');
  if (!in.read(s.data(), static_cast<std::streamsize>(n))) throw InputError(where + ": truncated head file");
  return s;
}

void write_matrix(std::ostream& out, const MatrixF& m) {
  write_u64(out, static_cast<uint64_t>(m.rows()));
  write_u64(out, static_cast<uint64_t>(m.cols()));
  out.write(reinterpret_cast<const char*>(m.data()), static_cast<std::streamsize>(m.size() * 4));
}

MatrixF read_matrix(std::istream& in, const std::string& where) {
  const uint64_t rows = read_u64(in, where), cols = read_u64(in, where);
  if (rows == 0 || cols == 0 || rows > kMaxHeadScalars || cols > kMaxHeadScalars ||
      rows * cols > kMaxHeadScalars)
    throw InputError(where + ": implausible head matrix shape " + std::to_string(rows) + "x" +
                     std::to_string(cols));
  // Read in chunks so that memory grows with the bytes actually present: a corrupt shape in a
  // short file costs at most one chunk, not the gigabyte the shape claims.
  const uint64_t total = rows * cols;
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  std::vector<float> data;
  data.reserve(static_cast<size_t>(std::min(total, kChunk)));
  while (data.size() < total) {
    const size_t at = data.size();
    const size_t len = static_cast<size_t>(std::min<uint64_t>(kChunk, total - at));
    data.resize(at + len);
    if (!in.read(reinterpret_cast<char*>(data.data() + at), static_cast<std::streamsize>(len * 4)))
      throw InputError(where + ": truncated head file");
  }
  MatrixF m = Eigen::Map<const MatrixF>(data.data(), static_cast<Eigen::Index>(rows),
                                        static_cast<Eigen::Index>(cols));
  if (!all_finite(m)) throw InputError(where + ": head holds NaN or Inf");
  return m;
}

void write_vector(std::ostream& out, const VectorF& v) {
  write_matrix(out, MatrixF(v.transpose()));
}

VectorF read_vector(std::istream& in, const std::string& where) {
  MatrixF m = read_matrix(in, where);
  if (m.rows() != 1) throw InputError(where + ": expected a bias vector");
  return m.row(0).transpose();
}

}  // namespace head_format

using namespace head_format;

namespace {

constexpr char kMagic[8] = {'F', 'N', 'H', 'E', 'A', 'D', '1', '\0'};

// X W^T + b through BLAS: Eigen's own float product, built for the baseline ISA without
// threads, made scoring the test set with the FedTC adapter (two layers of 1280 x 1024 and
// 1024 x 512) several times slower than training it.
MatrixF affine(const MatrixF& X, const MatrixF& W, const VectorF& b) {
  MatrixF out(X.rows(), W.rows());
  if (X.rows() > 0 && W.rows() > 0 && X.cols() > 0)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(X.rows()), static_cast<int>(W.rows()),
                static_cast<int>(X.cols()), 1.0f, X.data(), static_cast<int>(X.cols()), W.data(),
                static_cast<int>(W.cols()), 0.0f, out.data(), static_cast<int>(out.cols()));
  else
    out.setZero();
  out.rowwise() += b.transpose();
  return out;
}

ScriptTensor script_tensor(std::string name, const MatrixF& m) {
  return {std::move(name), {m.rows(), m.cols()}, std::vector<float>(m.data(), m.data() + m.size())};
}

ScriptTensor script_tensor(std::string name, const VectorF& v) {
  return {std::move(name), {v.size()}, std::vector<float>(v.data(), v.data() + v.size())};
}

void l2_normalize_rows(MatrixF& m) {
  // Same epsilon as torch.nn.functional.normalize, so a C++ forward pass matches PyTorch's.
  const VectorF norms = m.rowwise().norm().cwiseMax(1e-12f);
  m.array().colwise() /= norms.array();
}

}  // namespace

Labels Head::predict(const MatrixF& X) const {
  const MatrixF s = scores(X);
  Labels out(static_cast<size_t>(s.rows()));
  for (Eigen::Index i = 0; i < s.rows(); ++i) {
    Eigen::Index best = 0;
    s.row(i).maxCoeff(&best);
    out[static_cast<size_t>(i)] = static_cast<int32_t>(best);
  }
  return out;
}

namespace {

// Prediction bookkeeping indexes by label: check before indexing, never after.
void check_test_set(const Features& test, int classes) {
  if (static_cast<size_t>(test.X.rows()) != test.y.size())
    throw InputError("test set: " + std::to_string(test.X.rows()) + " feature rows but " +
                     std::to_string(test.y.size()) + " labels");
  for (size_t i = 0; i < test.y.size(); ++i)
    if (test.y[i] < 0 || test.y[i] >= classes)
      throw InputError("test set: label " + std::to_string(test.y[i]) + " at row " + std::to_string(i) +
                       " is outside [0, " + std::to_string(classes) + ")");
}

}  // namespace

double Head::accuracy(const Features& test) const {
  check_test_set(test, std::max(num_classes(), test.num_classes));
  if (test.size() == 0) return 0.0;
  const Labels p = predict(test.X);
  int64_t correct = 0;
  for (size_t i = 0; i < p.size(); ++i) correct += p[i] == test.y[i];
  return static_cast<double>(correct) / static_cast<double>(p.size());
}

TestScore Head::score(const Features& test) const {
  TestScore s;
  s.per_class = per_class_accuracy(test);
  int64_t correct = 0;
  for (const ClassAccuracy& c : s.per_class) correct += c.correct;
  s.accuracy = test.size() ? static_cast<double>(correct) / static_cast<double>(test.size()) : 0.0;
  return s;
}

std::vector<ClassAccuracy> Head::per_class_accuracy(const Features& test) const {
  const int classes = std::max(num_classes(), test.num_classes);
  check_test_set(test, classes);
  std::vector<ClassAccuracy> out(static_cast<size_t>(classes));
  if (test.size() == 0) return out;
  const Labels p = predict(test.X);
  for (size_t i = 0; i < p.size(); ++i) {
    auto& c = out.at(static_cast<size_t>(test.y[i]));
    ++c.total;
    c.correct += p[i] == test.y[i];
  }
  return out;
}

void Head::save(std::ostream& out) const {
  out.write(kMagic, sizeof(kMagic));
  write_string(out, kind());
  save_body(out);
}

std::unique_ptr<Head> Head::load(std::istream& in, const std::string& where) {
  char magic[sizeof(kMagic)];
  if (!in.read(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0)
    throw InputError(where + ": not a fednode head file (bad magic)");
  const std::string kind = read_string(in, where);
  // Every kind's codec knows its body: methods/heads' own, and the heads methods train themselves.
  if (const HeadCodec* codec = head_codec_for(kind)) return codec->load(kind, in, where);
  throw InputError(where + ": unknown head kind '" + kind + "'");
}

LinearHead::LinearHead(std::string kind, MatrixF W, VectorF b)
    : kind_(std::move(kind)), W_(std::move(W)), b_(std::move(b)) {
  if (b_.size() != W_.rows()) throw std::invalid_argument("LinearHead: bias size != number of classes");
}

MatrixF LinearHead::scores(const MatrixF& X) const {
  if (X.cols() != W_.cols())
    throw InputError("head expects " + std::to_string(W_.cols()) + " features, got " +
                     std::to_string(X.cols()));
  return affine(X, W_, b_);
}

ScriptPart LinearHead::script() const {
  ScriptPart p;
  p.code = "def head(self, x: Tensor) -> Tensor:\n"
           "    return torch.linear(x, self.head_W, self.head_b)\n";
  p.tensors = {script_tensor("head_W", W_), script_tensor("head_b", b_)};
  return p;
}

void LinearHead::save_body(std::ostream& out) const {
  write_matrix(out, W_);
  write_vector(out, b_);
}

AdapterHead::AdapterHead(std::vector<Layer> layers) : layers_(std::move(layers)) {
  if (layers_.size() != 3) throw std::invalid_argument("AdapterHead: expected 3 layers");
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].b.size() != layers_[i].W.rows())
      throw InputError("adapter layer " + std::to_string(i) + ": bias does not match weights");
    if (i > 0 && layers_[i].W.cols() != layers_[i - 1].W.rows())
      throw InputError("adapter layer " + std::to_string(i) + ": input size does not match layer " +
                       std::to_string(i - 1));
  }
}

MatrixF AdapterHead::scores(const MatrixF& X) const {
  if (X.cols() != dim())
    throw InputError("adapter expects " + std::to_string(dim()) + " features, got " +
                     std::to_string(X.cols()));
  MatrixF h = X;
  for (size_t i = 0; i < layers_.size(); ++i) {
    MatrixF next = affine(h, layers_[i].W, layers_[i].b);
    if (i + 1 < layers_.size()) {
      next = next.cwiseMax(0.0f);
      l2_normalize_rows(next);
    }
    h = std::move(next);
  }
  return h;
}

ScriptPart AdapterHead::script() const {
  // normalize as torch.nn.functional.normalize computes it: x / max(||x||_2, 1e-12), row by row.
  ScriptPart p;
  p.code =
      "def head(self, x: Tensor) -> Tensor:\n"
      "    h = torch.relu(torch.linear(x, self.head_W0, self.head_b0))\n"
      "    h = h / h.norm(2, [1], True).clamp_min(1e-12)\n"
      "    h = torch.relu(torch.linear(h, self.head_W1, self.head_b1))\n"
      "    h = h / h.norm(2, [1], True).clamp_min(1e-12)\n"
      "    return torch.linear(h, self.head_W2, self.head_b2)\n";
  for (size_t i = 0; i < layers_.size(); ++i) {
    p.tensors.push_back(script_tensor("head_W" + std::to_string(i), layers_[i].W));
    p.tensors.push_back(script_tensor("head_b" + std::to_string(i), layers_[i].b));
  }
  return p;
}

void AdapterHead::save_body(std::ostream& out) const {
  for (const auto& layer : layers_) {
    write_matrix(out, layer.W);
    write_vector(out, layer.b);
  }
}

}  // namespace fednode
