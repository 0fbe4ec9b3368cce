#include "methods/fgl/cnn.h"

#include "core/rng.h"
#include "core/torch_library.h"
#include "methods/blas_threads.h"
#include "methods/fgl/cnn_torch.h"
#include "methods/heads/head_format.h"

#include <algorithm>
#include <cmath>
#include <istream>
#include <ostream>

namespace fednode {
namespace {

constexpr int64_t kMaxCnnParameters = int64_t{1} << 26;

}  // namespace

std::vector<std::vector<int64_t>> cnn_layer_shapes(const CnnSpec& s) {
  const int64_t W = s.width, q = s.image_size / 4;
  return {{W, s.channels, 3, 3}, {W}, {2 * W, W, 3, 3}, {2 * W}, {s.hidden, 2 * W * q * q}, {s.hidden},
          {s.classes, s.hidden}, {s.classes}};
}

int64_t CnnSpec::parameter_count() const {
  int64_t total = 0;
  for (const auto& shape : cnn_layer_shapes(*this)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    total += n;
  }
  return total;
}

void CnnSpec::validate(const std::string& where) const {
  if (image_size < 4 || image_size > 4096 || image_size % 4 != 0)
    throw InputError(where + ": image size " + std::to_string(image_size) + " is not a multiple of 4 in [4, 4096]");
  if (channels < 1 || channels > 16) throw InputError(where + ": channels must be in [1, 16]");
  if (width < 1 || width > 4096 || hidden < 1 || hidden > 65536)
    throw InputError(where + ": width must be in [1, 4096] and hidden in [1, 65536]");
  if (classes < 1 || classes > 100000) throw InputError(where + ": classes must be in [1, 100000]");
  // Each factor is bounded above, so the count cannot overflow before this check.
  if (parameter_count() > kMaxCnnParameters)
    throw InputError(where + ": " + std::to_string(parameter_count()) + " parameters, at most " +
                     std::to_string(kMaxCnnParameters));
}

bool CnnSpec::operator==(const CnnSpec& o) const {
  return image_size == o.image_size && channels == o.channels && width == o.width && hidden == o.hidden &&
         classes == o.classes;
}

CnnModel cnn_init(const CnnSpec& s, uint64_t seed) {
  s.validate("CNN");
  // nn.Conv2d's and nn.Linear's reset_parameters: weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  // (Kaiming-uniform with a = sqrt(5) comes to that bound), drawn from fednode's own stream.
  Rng rng = Rng::stream(seed, Purpose::ModelInit, 0xC44);
  CnnModel m;
  m.spec = s;
  m.parameters.reserve(static_cast<size_t>(s.parameter_count()));
  const auto layers = cnn_layer_shapes(s);
  for (size_t l = 0; l < layers.size(); l += 2) {
    int64_t fan_in = 1;
    for (size_t d = 1; d < layers[l].size(); ++d) fan_in *= layers[l][d];
    const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    for (size_t k = l; k < l + 2; ++k) {
      int64_t n = 1;
      for (int64_t d : layers[k]) n *= d;
      for (int64_t i = 0; i < n; ++i) m.parameters.push_back(static_cast<float>((2 * rng.uniform() - 1) * bound));
    }
  }
  return m;
}

CnnModel train_cnn(const CnnModel& start, const MatrixF& images, const Labels& labels, const CnnTrainOptions& o) {
  const std::string where = "CNN training";
  start.spec.validate(where);
  if (static_cast<int64_t>(start.parameters.size()) != start.spec.parameter_count())
    throw InputError(where + ": " + std::to_string(start.parameters.size()) + " parameters for a spec of " +
                     std::to_string(start.spec.parameter_count()));
  if (images.cols() != start.spec.pixels())
    throw InputError(where + ": images of " + std::to_string(images.cols()) + " pixels, the CNN takes " +
                     std::to_string(start.spec.pixels()));
  if (static_cast<int64_t>(labels.size()) != images.rows() || images.rows() == 0)
    throw InputError(where + ": " + std::to_string(labels.size()) + " labels for " + std::to_string(images.rows()) + " images");
  for (int32_t y : labels)
    if (y < 0 || y >= start.spec.classes) throw InputError(where + ": label " + std::to_string(y) + " outside the classes");
  if (o.epochs < 0 || o.min_steps < 0 || o.batch_size < 1 || !(o.lr > 0))
    throw InputError(where + ": epochs and steps must be >= 0, the batch >= 1 and lr > 0");
  CnnModel out;
  BlasSingleThread blas;
  torch_function<decltype(fednode_torch_cnn_train)>("fednode_torch_cnn_train")(start, images, labels, o, &out);
  return out;
}

CnnHead::CnnHead(CnnModel model) : model_(std::move(model)) {
  model_.spec.validate("CNN head");
  if (static_cast<int64_t>(model_.parameters.size()) != model_.spec.parameter_count())
    throw InputError("CNN head: " + std::to_string(model_.parameters.size()) + " parameters for a spec of " +
                     std::to_string(model_.spec.parameter_count()));
}

MatrixF CnnHead::scores(const MatrixF& X) const {
  if (X.cols() != dim())
    throw InputError("CNN head: inputs of " + std::to_string(X.cols()) + " pixels, it takes " + std::to_string(dim()));
  constexpr Eigen::Index kBlock = 1024;  // bounds the activations held at once
  MatrixF out(X.rows(), num_classes());
  BlasSingleThread blas;
  for (Eigen::Index first = 0; first < X.rows(); first += kBlock) {
    const Eigen::Index n = std::min(kBlock, X.rows() - first);
    MatrixF block;
    torch_function<decltype(fednode_torch_cnn_scores)>("fednode_torch_cnn_scores")(model_, X.middleRows(first, n), &block);
    out.middleRows(first, n) = block;
  }
  return out;
}

ScriptPart CnnHead::script() const {
  const CnnSpec& s = model_.spec;
  ScriptPart p;
  p.code = "def head(self, x: Tensor) -> Tensor:\n"
           "    h = x.reshape([x.size(0), " + std::to_string(s.channels) + ", " + std::to_string(s.image_size) + ", " +
           std::to_string(s.image_size) + "])\n"
           "    h = torch.max_pool2d(torch.relu(torch.conv2d(h, self.head_p0, self.head_p1, [1, 1], [1, 1])), [2, 2])\n"
           "    h = torch.max_pool2d(torch.relu(torch.conv2d(h, self.head_p2, self.head_p3, [1, 1], [1, 1])), [2, 2])\n"
           "    h = torch.relu(torch.linear(h.flatten(1), self.head_p4, self.head_p5))\n"
           "    return torch.linear(h, self.head_p6, self.head_p7)\n";
  p.tensors = split_flat("head_p", model_.parameters, cnn_layer_shapes(s));
  return p;
}

void CnnHead::save_body(std::ostream& out) const {
  const CnnSpec& s = model_.spec;
  for (int v : {s.image_size, s.channels, s.width, s.hidden, s.classes}) head_format::write_u64(out, static_cast<uint64_t>(v));
  head_format::write_matrix(out, Eigen::Map<const MatrixF>(model_.parameters.data(), 1,
                                                           static_cast<Eigen::Index>(model_.parameters.size())));
}

std::unique_ptr<Head> load_cnn_head(std::istream& in, const std::string& where) {
  CnnModel m;
  for (int* v : {&m.spec.image_size, &m.spec.channels, &m.spec.width, &m.spec.hidden, &m.spec.classes}) {
    const uint64_t read = head_format::read_u64(in, where);
    if (read > (uint64_t{1} << 30)) throw InputError(where + ": implausible CNN spec value " + std::to_string(read));
    *v = static_cast<int>(read);
  }
  m.spec.validate(where + ": CNN spec");
  const MatrixF p = head_format::read_matrix(in, where);
  if (p.rows() != 1 || p.cols() != m.spec.parameter_count())
    throw InputError(where + ": " + std::to_string(p.size()) + " CNN parameters for a spec of " +
                     std::to_string(m.spec.parameter_count()));
  m.parameters.assign(p.data(), p.data() + p.size());
  return std::make_unique<CnnHead>(std::move(m));
}

}  // namespace fednode
