#include "features/preprocess.h"

#include "core/types.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

namespace fednode {

namespace {

constexpr int kMinInputSize = 8;
constexpr int kMaxInputSize = 2048;
constexpr int64_t kMaxOutputDim = int64_t(1) << 20;
constexpr int kMaxImageSide = 1 << 16;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string format_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

std::string format_list(const std::vector<float>& v) {
  if (v.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + format_float(v[i]);
  return out;
}

long long parse_integer(const std::string& value, const std::string& at, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE)
    throw InputError(at + ": expected an integer, got '" + value + "'");
  if (v < lo || v > hi)
    throw InputError(at + ": " + value + " is outside [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  return v;
}

std::vector<float> parse_list(const std::string& value, const std::string& at) {
  if (lower(value) == "none") return {};
  std::vector<float> out;
  std::stringstream ss(value);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
      throw InputError(at + ": expected 'none' or comma-separated numbers, got '" + value + "'");
    out.push_back(static_cast<float>(v));
    if (out.size() > 4) throw InputError(at + ": more than 4 numbers in '" + value + "'");
  }
  if (out.empty()) throw InputError(at + ": expected 'none' or comma-separated numbers, got ''");
  return out;
}

template <typename T>
T parse_choice(const std::string& value, const std::string& at,
               const std::vector<std::pair<const char*, T>>& choices) {
  const std::string v = lower(value);
  std::string names;
  for (const auto& c : choices) {
    if (v == c.first) return c.second;
    names += (names.empty() ? "" : " | ") + std::string(c.first);
  }
  throw InputError(at + ": '" + value + "' is not one of " + names);
}

// Where each output sample along one axis reads from, exactly as PyTorch's CPU interpolate kernels
// compute it for float inputs (upsample_bilinear2d / upsample_nearest2d, align_corners=False), so
// that features match a Python pipeline to float rounding.
struct AxisTaps {
  std::vector<int> i0, i1;
  std::vector<float> w0, w1;
};

AxisTaps axis_taps(int in, int resized, int offset, int out, ResizeMode mode) {
  AxisTaps t;
  t.i0.resize(out);
  t.i1.resize(out);
  t.w0.resize(out);
  t.w1.resize(out);
  const float scale = static_cast<float>(in) / static_cast<float>(resized);
  for (int k = 0; k < out; ++k) {
    const int o = k + offset;
    if (mode == ResizeMode::Nearest) {
      int src;
      if (resized == in) src = o;
      else if (resized == 2 * in) src = o >> 1;
      else src = std::min(static_cast<int>(std::floor(static_cast<float>(o) * scale)), in - 1);
      t.i0[k] = t.i1[k] = src;
      t.w0[k] = 1.0f;
      t.w1[k] = 0.0f;
    } else {
      float real = scale * (static_cast<float>(o) + 0.5f) - 0.5f;
      if (real < 0.0f) real = 0.0f;
      const int i0 = static_cast<int>(real);
      const float l1 = std::min(std::max(real - static_cast<float>(i0), 0.0f), 1.0f);
      t.i0[k] = i0;
      t.i1[k] = i0 + (i0 < in - 1 ? 1 : 0);
      t.w0[k] = 1.0f - l1;
      t.w1[k] = l1;
    }
  }
  return t;
}

// Resizes one float plane (h x w) into `out` (S x S) with separable taps: rows first, then
// columns, which evaluates the same expression in the same order as PyTorch's bilinear kernel.
void resize_plane(const std::vector<float>& plane, int h, int w, const AxisTaps& rows,
                  const AxisTaps& cols, int size, std::vector<float>& tmp, float* out) {
  tmp.assign(static_cast<size_t>(h) * size, 0.0f);
  std::vector<char> needed(static_cast<size_t>(h), 0);
  for (int k = 0; k < size; ++k) needed[rows.i0[k]] = needed[rows.i1[k]] = 1;
  for (int r = 0; r < h; ++r) {
    if (!needed[r]) continue;
    const float* src = plane.data() + static_cast<size_t>(r) * w;
    float* dst = tmp.data() + static_cast<size_t>(r) * size;
    for (int k = 0; k < size; ++k) dst[k] = cols.w0[k] * src[cols.i0[k]] + cols.w1[k] * src[cols.i1[k]];
  }
  for (int k = 0; k < size; ++k) {
    const float* a = tmp.data() + static_cast<size_t>(rows.i0[k]) * size;
    const float* b = tmp.data() + static_cast<size_t>(rows.i1[k]) * size;
    const float wa = rows.w0[k], wb = rows.w1[k];
    float* dst = out + static_cast<size_t>(k) * size;
    for (int j = 0; j < size; ++j) dst[j] = wa * a[j] + wb * b[j];
  }
}

}  // namespace

void Preprocessing::validate(const std::string& where) const {
  if (input_size < kMinInputSize || input_size > kMaxInputSize)
    throw InputError(where + ": input_size " + std::to_string(input_size) + " is outside [" +
                     std::to_string(kMinInputSize) + ", " + std::to_string(kMaxInputSize) + "]");
  if (channels != 1 && channels != 3)
    throw InputError(where + ": channels must be 1 or 3, got " + std::to_string(channels));
  if (mean.empty() != std.empty())
    throw InputError(where + ": mean and std must both be 'none' or both be given");
  if (!mean.empty() && (static_cast<int>(mean.size()) != channels ||
                        static_cast<int>(std.size()) != channels))
    throw InputError(where + ": mean and std need " + std::to_string(channels) +
                     " numbers each (one per channel), got " + std::to_string(mean.size()) +
                     " and " + std::to_string(std.size()));
  for (float s : std)
    // Below float32's smallest normal number a std rounds to 0 or divides to infinity.
    if (!(s >= std::numeric_limits<float>::min()) || !std::isfinite(s)) {
      std::ostringstream shown;
      shown << s;
      throw InputError(where + ": std values must be positive float32 numbers of at least 1.2e-38 (one is " +
                       shown.str() + " as float32)");
    }
  for (float m : mean)
    if (!std::isfinite(m)) throw InputError(where + ": mean values must be finite");
  if (output_dim < 0 || output_dim > kMaxOutputDim)
    throw InputError(where + ": output_dim " + std::to_string(output_dim) + " is outside [1, " +
                     std::to_string(kMaxOutputDim) + "]");
}

std::string Preprocessing::canonical() const {
  std::string s;
  s += "input_size=" + std::to_string(input_size) + "\n";
  s += "channels=" + std::to_string(channels) + "\n";
  s += std::string("channel_order=") + (channel_order == ChannelOrder::Rgb ? "rgb" : "bgr") + "\n";
  s += std::string("grayscale=") + (grayscale_to_rgb ? "repeat" : "reject") + "\n";
  s += std::string("resize=") + (resize == ResizeMode::Bilinear ? "bilinear" : "nearest") + "\n";
  s += std::string("fit=") + (fit == FitMode::Stretch ? "stretch" : "center_crop") + "\n";
  s += std::string("value_range=") + (value_range == ValueRange::Unit ? "0-1" : "0-255") + "\n";
  s += "mean=" + format_list(mean) + "\n";
  s += "std=" + format_list(std) + "\n";
  return s;
}

std::string Preprocessing::to_text() const {
  std::string s = "# fednode backbone preprocessing (key = value); see docs/backbones.md\n";
  std::stringstream in(canonical());
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    s += line.substr(0, eq) + " = " + line.substr(eq + 1) + "\n";
  }
  if (output_dim > 0) s += "output_dim = " + std::to_string(output_dim) + "\n";
  return s;
}

Preprocessing Preprocessing::parse(const std::string& text, const std::string& where) {
  Preprocessing p;
  std::map<std::string, int> seen;
  std::stringstream in(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string at = where + ":" + std::to_string(line_no);
    std::string line = raw.substr(0, raw.find('#'));
    line = trim(line);
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw InputError(at + ": expected 'key = value', got '" + line + "'");
    const std::string key = lower(trim(line.substr(0, eq)));
    const std::string value = trim(line.substr(eq + 1));
    const std::string at_key = at + ": " + key;
    if (seen.count(key))
      throw InputError(at + ": '" + key + "' already given on line " + std::to_string(seen[key]));
    seen[key] = line_no;
    if (key == "input_size") {
      p.input_size = static_cast<int>(parse_integer(value, at_key, kMinInputSize, kMaxInputSize));
    } else if (key == "channels") {
      p.channels = static_cast<int>(parse_integer(value, at_key, 1, 3));
      if (p.channels == 2) throw InputError(at_key + ": must be 1 or 3");
    } else if (key == "channel_order") {
      p.channel_order = parse_choice<ChannelOrder>(
          value, at_key, {{"rgb", ChannelOrder::Rgb}, {"bgr", ChannelOrder::Bgr}});
    } else if (key == "grayscale") {
      p.grayscale_to_rgb = parse_choice<bool>(value, at_key, {{"repeat", true}, {"reject", false}});
    } else if (key == "resize") {
      p.resize = parse_choice<ResizeMode>(
          value, at_key, {{"bilinear", ResizeMode::Bilinear}, {"nearest", ResizeMode::Nearest}});
    } else if (key == "fit") {
      p.fit = parse_choice<FitMode>(value, at_key,
                                    {{"stretch", FitMode::Stretch}, {"center_crop", FitMode::CenterCrop}});
    } else if (key == "value_range") {
      p.value_range = parse_choice<ValueRange>(value, at_key,
                                               {{"0-1", ValueRange::Unit}, {"0-255", ValueRange::Byte}});
    } else if (key == "mean") {
      p.mean = parse_list(value, at_key);
    } else if (key == "std") {
      p.std = parse_list(value, at_key);
    } else if (key == "output_dim") {
      p.output_dim = parse_integer(value, at_key, 1, kMaxOutputDim);
    } else {
      throw InputError(at + ": unknown key '" + key +
                       "' (known: input_size, channels, channel_order, grayscale, resize, fit, "
                       "value_range, mean, std, output_dim)");
    }
  }
  if (!seen.count("input_size")) throw InputError(where + ": input_size is required");
  p.validate(where);
  return p;
}

Preprocessing Preprocessing::load(const std::string& path) {
  require_regular_file(path, "preprocessing file");  // a FIFO would block, a directory reads as empty
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the preprocessing file");
  // A sidecar is a handful of lines; refusing anything large keeps a wrong path (say, the model
  // itself) from being read into memory and reported line by line.
  std::string text;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > 65536) throw InputError(path + ": larger than 64 KiB, not a preprocessing file");
  }
  if (text.find('\0') != std::string::npos)
    throw InputError(path + ": binary content, not a preprocessing file");
  return parse(text, path);
}

std::string sidecar_path(const std::string& model_path) { return model_path + ".preprocessing"; }

void preprocess_image(const ImageView& image, const Preprocessing& p, float* out,
                      const std::string& where) {
  if (!image.pixels || image.height <= 0 || image.width <= 0 || image.height > kMaxImageSide ||
      image.width > kMaxImageSide)
    throw InputError(where + ": image size " + std::to_string(image.height) + "x" +
                     std::to_string(image.width) + " is empty or too large");
  if (image.channels != 1 && image.channels != 3)
    throw InputError(where + ": images must have 1 or 3 channels, got " + std::to_string(image.channels));
  if (p.channels == 3 && image.channels == 1 && !p.grayscale_to_rgb)
    throw InputError(where + ": grayscale image, and the backbone's preprocessing says grayscale = reject");

  const int h = image.height, w = image.width, S = p.input_size;
  const size_t n = static_cast<size_t>(h) * w;
  const float divisor = p.value_range == ValueRange::Unit ? 255.0f : 1.0f;

  // The planes resizing works on, in value units: either the image's own channels or, for a
  // 1-channel model fed RGB, PIL's convert("L") luma (integer ITU-R 601-2), as a Python loader
  // with PIL would produce.
  std::vector<std::vector<float>> planes;
  if (p.channels == 1 && image.channels == 3) {
    planes.assign(1, std::vector<float>(n));
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* px = image.pixels + 3 * i;
      const uint32_t l = (px[0] * 19595u + px[1] * 38470u + px[2] * 7471u + 0x8000u) >> 16;
      planes[0][i] = static_cast<float>(l) / divisor;
    }
  } else {
    planes.assign(static_cast<size_t>(image.channels), std::vector<float>(n));
    for (size_t i = 0; i < n; ++i)
      for (int c = 0; c < image.channels; ++c)
        planes[c][i] = static_cast<float>(image.pixels[i * image.channels + c]) / divisor;
  }

  int rh = S, rw = S, top = 0, left = 0;
  if (p.fit == FitMode::CenterCrop) {
    // torchvision Resize(S): the shorter side becomes S, the longer int(S * long / short);
    // CenterCrop(S): offsets int(round((resized - S) / 2)), with Python's round-half-to-even.
    if (h <= w) rw = static_cast<int>(static_cast<double>(S) * w / h);
    else rh = static_cast<int>(static_cast<double>(S) * h / w);
    top = static_cast<int>(std::nearbyint((rh - S) / 2.0));
    left = static_cast<int>(std::nearbyint((rw - S) / 2.0));
  }
  const AxisTaps rows = axis_taps(h, rh, top, S, p.resize);
  const AxisTaps cols = axis_taps(w, rw, left, S, p.resize);

  const size_t plane_size = static_cast<size_t>(S) * S;
  std::vector<float> tmp;
  for (size_t c = 0; c < planes.size(); ++c)
    resize_plane(planes[c], h, w, rows, cols, S, tmp, out + c * plane_size);
  if (p.channels == 3 && planes.size() == 1) {
    std::copy(out, out + plane_size, out + plane_size);
    std::copy(out, out + plane_size, out + 2 * plane_size);
  }
  if (p.channels == 3 && p.channel_order == ChannelOrder::Bgr)
    std::swap_ranges(out, out + plane_size, out + 2 * plane_size);
  if (!p.mean.empty()) {
    for (int c = 0; c < p.channels; ++c) {
      float* plane = out + static_cast<size_t>(c) * plane_size;
      const float m = p.mean[c], s = p.std[c];
      for (size_t i = 0; i < plane_size; ++i) plane[i] = (plane[i] - m) / s;
    }
  }
}

}  // namespace fednode
