// The TorchScript generators' sidecar, the checks before LibTorch sees anything, and the generator
// that answers requests by name or by text (torch_generator.h).
#include "methods/fgl/torch_generator.h"

#include "core/rng.h"
#include "methods/method.h"
#include "core/torch_library.h"
#include "methods/blas_threads.h"
#include "methods/fgl/torch_generator_torch.h"

#include <chrono>
#include <cmath>
#include <map>
#include <sstream>

namespace fednode {
namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

int whole(const std::string& value, const std::string& at, int low, int high) {
  try {
    size_t used = 0;
    const long v = std::stol(value, &used);
    if (used == value.size() && v >= low && v <= high) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  throw InputError(at + ": '" + value + "' is not a whole number in [" + std::to_string(low) + ", " +
                   std::to_string(high) + "]");
}

class TorchGenerator final : public Generator {
 public:
  TorchGenerator(std::string module, GeneratorInfo info, std::string digest)
      : module_(std::move(module)), info_(std::move(info)), digest_(std::move(digest)) {
    for (size_t i = 0; i < info_.vocabulary.size(); ++i) by_name_.emplace(info_.vocabulary[i], static_cast<int64_t>(i));
  }

  std::string describe() const override {
    return std::string("fednode ") + to_string(info_.kind) + " generator " + digest_.substr(0, 16);
  }

  ImageBatch generate(const std::vector<GenerationRequest>& requests, uint64_t seed,
                           const std::atomic<bool>* stop) const override {
    const bool text = info_.kind == Conditioning::Text;
    int64_t n = 0;
    DrawConditions conditions;
    for (const GenerationRequest& r : requests) {
      if (r.count < 0) throw InputError("generator: a request for a negative number of images");
      if (!text && !by_name_.count(r.name))
        throw InputError("generator: " + describe() + " knows no class '" + r.name + "' (its vocabulary: " +
                         vocabulary() + ")");
      if (text) {
        conditions.texts.push_back(r.caption.empty() ? r.prompt : r.caption);
        conditions.negative_texts.push_back(r.negative_prompt);
      }
      n += r.count;
    }
    ImageBatch out;
    out.channels = info_.channels;
    out.size = info_.image_size;
    MatrixF z(n, info_.latent);
    conditions.rows.resize(static_cast<size_t>(n));
    out.labels.resize(static_cast<size_t>(n));
    int64_t row = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const GenerationRequest& r = requests[i];
      // Per request a stream of its own: a request's images do not change when another's count does.
      Rng rng = Rng::stream(seed, Purpose::Synthesis, static_cast<uint64_t>(i));
      const int64_t condition = text ? static_cast<int64_t>(i) : by_name_.at(r.name);
      for (int64_t k = 0; k < r.count; ++k, ++row) {
        for (int j = 0; j < info_.latent; ++j) z(row, j) = static_cast<float>(rng.normal());
        conditions.rows[static_cast<size_t>(row)] = condition;
        out.labels[static_cast<size_t>(row)] = r.label;
      }
    }
    if (n == 0) {
      out.pixels.resize(0, int64_t{info_.channels} * info_.image_size * info_.image_size);
      return out;
    }
    BlasSingleThread blas;
    torch_function<decltype(fednode_torch_generator_draw)>("fednode_torch_generator_draw")(
        module_, z, conditions, info_.channels, info_.image_size, stop, &out.pixels);
    return out;
  }

 private:
  std::string vocabulary() const {
    std::string s;
    for (size_t i = 0; i < info_.vocabulary.size() && i < 20; ++i) s += (i ? ", " : "") + info_.vocabulary[i];
    return info_.vocabulary.size() > 20 ? s + ", ..." : s;
  }

  std::string module_;
  GeneratorInfo info_;
  std::string digest_;
  std::map<std::string, int64_t> by_name_;
};

}  // namespace

void GeneratorInfo::validate(const std::string& where) const {
  if (latent < 1 || latent > 4096) throw InputError(where + ": latent must be in [1, 4096]");
  if (image_size < 4 || image_size > 1024 || image_size % 4 != 0)
    throw InputError(where + ": image_size must be a multiple of 4 in [4, 1024]");
  if (channels < 1 || channels > 4) throw InputError(where + ": channels must be in [1, 4]");
  if (kind == Conditioning::Label && vocabulary.empty())
    throw InputError(where + ": names no class (a label generator needs a 'class = NAME' line per label)");
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < vocabulary.size(); ++i) {
    if (vocabulary[i].empty()) throw InputError(where + ": class " + std::to_string(i) + " has an empty name");
    if (!seen.emplace(vocabulary[i], i).second)
      throw InputError(where + ": class '" + vocabulary[i] + "' is listed twice");
  }
}

std::string GeneratorInfo::to_text() const {
  std::ostringstream s;
  s << "# fednode's built-in FGL generator (docs/methods/fgl.md): a stand-in for a foundation model\n"
    << "kind = " << to_string(kind) << "\nlatent = " << latent << "\nimage_size = " << image_size << "\nchannels = " << channels << "\n";
  for (const std::string& name : vocabulary) s << "class = " << name << "\n";
  for (const std::string& line : provenance) s << "trained_on = " << line << "\n";
  return s.str();
}

GeneratorInfo GeneratorInfo::parse(const std::string& text, const std::string& where) {
  GeneratorInfo info;
  std::istringstream in(text);
  std::string line;
  std::map<std::string, int> seen;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string at = where + ":" + std::to_string(number);
    const std::string content = trim(line);  // a class name may hold '#': only whole lines are comments
    if (content.empty() || content[0] == '#') continue;
    const size_t eq = content.find('=');
    if (eq == std::string::npos) throw InputError(at + ": expected 'key = value'");
    const std::string key = trim(content.substr(0, eq)), value = trim(content.substr(eq + 1));
    const bool repeats = key == "class" || key == "trained_on";
    if (!repeats && seen[key]++) throw InputError(at + ": '" + key + "' given twice");
    if (key == "kind") {
      if (value == "label") info.kind = Conditioning::Label;
      else if (value == "text") info.kind = Conditioning::Text;
      else throw InputError(at + ": kind '" + value + "' (label or text)");
    } else if (key == "latent") {
      info.latent = whole(value, at, 1, 4096);
    } else if (key == "image_size") {
      info.image_size = whole(value, at, 4, 1024);
    } else if (key == "channels") {
      info.channels = whole(value, at, 1, 4);
    } else if (key == "class") {
      info.vocabulary.push_back(value);
    } else if (key == "trained_on") {
      info.provenance.push_back(value);
    } else {
      throw InputError(at + ": unknown key '" + key + "' (kind, latent, image_size, channels, class, trained_on)");
    }
  }
  for (const char* required : {"kind", "latent", "image_size", "channels"})
    if (!seen.count(required)) throw InputError(where + ": '" + required + "' is missing");
  info.validate(where);
  return info;
}

const char* to_string(Conditioning c) { return c == Conditioning::Text ? "text" : "label"; }

const std::vector<std::string>& text_generator_phrasings() {
  static const std::vector<std::string> v = {"{name}", FglOptions{}.prompt, "a photo of a {name}"};
  return v;
}

TrainedGenerator train_generator(const MatrixF& images, const Labels& labels, int channels, int size,
                                       const std::vector<std::string>& vocabulary, const GeneratorTrainOptions& o) {
  const std::string where = "train-generator";
  if (size < 4 || size % 4 != 0) throw InputError(where + ": images of side " + std::to_string(size) + ": the side must be a multiple of 4");
  if (images.cols() != int64_t{channels} * size * size)
    throw InputError(where + ": images of " + std::to_string(images.cols()) + " values, expected " +
                     std::to_string(channels) + " x " + std::to_string(size) + " x " + std::to_string(size));
  if (static_cast<int64_t>(labels.size()) != images.rows())
    throw InputError(where + ": " + std::to_string(labels.size()) + " labels for " + std::to_string(images.rows()) + " images");
  if (images.rows() < o.batch_size)
    throw InputError(where + ": " + std::to_string(images.rows()) + " images, fewer than one batch of " +
                     std::to_string(o.batch_size));
  for (int32_t y : labels)
    if (y < 0 || y >= static_cast<int32_t>(vocabulary.size()))
      throw InputError(where + ": label " + std::to_string(y) + " outside the " + std::to_string(vocabulary.size()) +
                       " classes named");
  if (!all_finite(images) || images.minCoeff() < 0.0f || images.maxCoeff() > 1.0f)
    throw InputError(where + ": pixel values must be in [0, 1]");
  if (o.latent < 1 || o.width < 1 || o.epochs < 1 || o.batch_size < 2 || !(o.lr > 0) || !(o.beta1 >= 0 && o.beta1 < 1))
    throw InputError(where + ": latent, width and epochs must be >= 1, the batch >= 2, lr > 0, beta1 in [0, 1)");
  TrainedGenerator out;
  out.info.kind = o.conditioning;
  out.info.latent = o.latent;
  out.info.image_size = size;
  out.info.channels = channels;
  out.info.vocabulary = vocabulary;
  out.info.validate(where);
  const auto t0 = std::chrono::steady_clock::now();
  BlasSingleThread blas;
  const std::vector<std::string> none;
  torch_function<decltype(fednode_torch_generator_train)>("fednode_torch_generator_train")(
      images, labels, channels, size, vocabulary, o.conditioning == Conditioning::Text ? text_generator_phrasings() : none,
      o, &out.module);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::shared_ptr<const Generator> make_torch_generator(std::string module, GeneratorInfo info, std::string digest) {
  info.validate("generator " + digest.substr(0, 16));
  return std::make_shared<TorchGenerator>(std::move(module), std::move(info), std::move(digest));
}

}  // namespace fednode
