#include "features/npy.h"

#include "core/float16.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

namespace fednode {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// numpy itself refuses headers over 10000 bytes by default; allow more, but stay bounded.
constexpr uint32_t kMaxHeaderLen = 1u << 20;
constexpr int64_t kMaxLabel = std::numeric_limits<int32_t>::max();
// An inferred class count above this is a corrupt or wrong file, not a dataset.
constexpr int64_t kMaxInferredClasses = 1000000;

bool host_is_little() {
  const uint16_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

// ---- A parser for the Python literal numpy writes as the header ----------------------------
// numpy writes repr() of a dict; other writers vary quotes, spacing and trailing commas, and
// Python 2 numpy wrote shapes like (3L, 4L). Parse the literal rather than pattern-match it.

struct PyValue {
  enum Kind { Str, Int, Bool, None, Tuple, Dict } kind = None;
  std::string str;
  int64_t num = 0;
  bool flag = false;
  std::vector<PyValue> items;                 // Tuple (also lists)
  std::vector<std::pair<std::string, PyValue>> entries;  // Dict, in order
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  PyValue parse() {
    skip_ws();
    PyValue v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the dictionary");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const bool at_end = s_.find_first_not_of(" \t\r\n", pos_) == std::string::npos;
    throw InputError(path_ + ": malformed .npy header at character " + std::to_string(pos_) +
                     ": " + (at_end && what != "unexpected end of header" ? "unexpected end of header, " : "") + what +
                     " (header: " + excerpt() + ")");
  }
  std::string excerpt() const {
    std::string e = s_.substr(0, s_.find_last_not_of(" \t\r\n") + 1);
    const bool cut = e.size() > 120;
    e.resize(std::min<size_t>(e.size(), 120));
    // The header is the file's text, not ours: printable ASCII only reaches the terminal.
    for (char& c : e)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
      else if (static_cast<unsigned char>(c) >= 0x7f) c = '?';
    return cut ? e + "..." : e;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' ||
                                s_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  PyValue value(int depth) {
    if (depth > 8) fail("nesting too deep");
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end of header");
    const char c = s_[pos_];
    if (c == '{') return dict(depth);
    if (c == '(' || c == '[') return sequence(depth);
    if (c == '\'' || c == '"') {
      PyValue v;
      v.kind = PyValue::Str;
      v.str = string();
      return v;
    }
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return integer();
    for (const char* word : {"True", "False", "None"}) {
      const size_t n = std::strlen(word);
      if (s_.compare(pos_, n, word) == 0) {
        pos_ += n;
        PyValue v;
        v.kind = word[0] == 'N' ? PyValue::None : PyValue::Bool;
        v.flag = word[0] == 'T';
        return v;
      }
    }
    fail(std::string("unexpected character '") + c + "'");
  }
  std::string string() {
    const char quote = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      out.push_back(s_[pos_++]);
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }
  PyValue integer() {
    const size_t start = pos_;
    bool negative = false;
    if (s_[pos_] == '-' || s_[pos_] == '+') negative = s_[pos_++] == '-';
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') fail("expected a digit");
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(s_[pos_++] - '0');
      if (v > (1ULL << 62)) {
        pos_ = start;
        fail("integer too large");
      }
    }
    if (pos_ < s_.size() && (s_[pos_] == 'L' || s_[pos_] == 'l')) ++pos_;  // Python 2 long
    PyValue out;
    out.kind = PyValue::Int;
    out.num = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return out;
  }
  PyValue sequence(int depth) {
    const char close = s_[pos_++] == '(' ? ')' : ']';
    PyValue out;
    out.kind = PyValue::Tuple;
    if (eat(close)) return out;
    for (;;) {
      out.items.push_back(value(depth + 1));
      if (eat(close)) return out;
      if (!eat(',')) fail(std::string("expected ',' or '") + close + "'");
      if (eat(close)) return out;
    }
  }
  PyValue dict(int depth) {
    ++pos_;
    PyValue out;
    out.kind = PyValue::Dict;
    if (eat('}')) return out;
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
        fail("expected a quoted key");
      std::string key = string();
      for (const auto& e : out.entries)
        if (e.first == key) fail("duplicate key '" + key + "'");
      if (!eat(':')) fail("expected ':' after key '" + key + "'");
      out.entries.emplace_back(std::move(key), value(depth + 1));
      if (eat('}')) return out;
      if (!eat(',')) fail("expected ',' or '}'");
      if (eat('}')) return out;
    }
  }

  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

// ---- Header and file layout -----------------------------------------------------------------

struct Dtype {
  char kind = 0;       // 'f', 'i', 'u'
  int size = 0;        // bytes per element
  bool little = true;  // byte order of the data in the file
  std::string descr;
};

struct NpyHeader {
  Dtype dtype;
  bool fortran = false;
  std::vector<int64_t> shape;
  int64_t elements = 1;
  uint64_t data_offset = 0;
};

// The file's text in a message: printable ASCII, other bytes as \xNN.
std::string shown(const std::string& s) {
  std::string out;
  for (const char c : s.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    }
  }
  return out;
}

Dtype parse_descr(const std::string& descr, const std::string& path) {
  auto bad = [&](const std::string& why) {
    return InputError(path + ": unsupported dtype '" + shown(descr) + "': " + why);
  };
  if (descr.size() < 3) throw bad("expected byte order, kind and size such as '<f4'");
  Dtype d;
  d.descr = descr;
  const char order = descr[0];
  d.kind = descr[1];
  const std::string size = descr.substr(2);
  if (size.empty() || size.size() > 2 ||
      !std::all_of(size.begin(), size.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw bad("expected an element size in bytes after the kind");
  d.size = std::stoi(size);
  if (d.kind != 'f' && d.kind != 'i' && d.kind != 'u')
    throw bad("only float (f) and integer (i, u) arrays are supported");
  if (d.size != 1 && d.size != 2 && d.size != 4 && d.size != 8) throw bad("element size must be 1, 2, 4 or 8");
  if (d.kind == 'f' && d.size == 1) throw bad("there is no 1-byte float");
  switch (order) {
    case '<': d.little = true; break;
    case '>': d.little = false; break;
    case '=': d.little = host_is_little(); break;
    case '|':
      if (d.size != 1) throw bad("byte order '|' is only valid for 1-byte types");
      d.little = true;
      break;
    default: throw bad("unknown byte order '" + shown(std::string(1, order)) + "' (expected <, >, = or |)");
  }
  return d;
}

class NpyReader {
 public:
  explicit NpyReader(const std::string& path) : path_((require_regular_file(path, ".npy file"), path)),
                                                 in_(path, std::ios::binary) {
    if (!in_) throw InputError(path + ": cannot open file: " + std::strerror(errno));
    in_.seekg(0, std::ios::end);
    const std::streamoff size = in_.tellg();
    // A regular file by stat whose size cannot be found by seeking (/proc/self/mem) is no .npy.
    if (size < 0) throw InputError(path + ": cannot find the file's size by seeking; not a .npy file");
    file_size_ = static_cast<uint64_t>(size);
    in_.seekg(0);
    header_ = read_header();
  }

  const NpyHeader& header() const { return header_; }
  const std::string& path() const { return path_; }

  // Reads the data element by element in file order, handing each one, converted to T,
  // to sink(index). The conversion goes through a bounded buffer.
  // The data as stored, for callers whose memory layout already matches the file.
  void read_raw(void* dst, uint64_t bytes) {
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes));
    if (static_cast<uint64_t>(in_.gcount()) != bytes)
      throw InputError(path_ + ": truncated data (the file shrank while reading)");
  }

  template <class T, class Sink>
  void for_each(Sink sink) {
    const Dtype& d = header_.dtype;
    const bool swap = d.little != host_is_little();
    const int64_t per_chunk = std::max<int64_t>(1, (4 << 20) / d.size);
    std::vector<unsigned char> buf;
    for (int64_t done = 0; done < header_.elements;) {
      const int64_t n = std::min<int64_t>(per_chunk, header_.elements - done);
      buf.resize(static_cast<size_t>(n * d.size));
      in_.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
      if (in_.gcount() != static_cast<std::streamsize>(buf.size()))
        throw InputError(path_ + ": truncated data (the file shrank while reading)");
      for (int64_t k = 0; k < n; ++k) {
        unsigned char* p = buf.data() + k * d.size;
        if (swap) std::reverse(p, p + d.size);
        sink(done + k, convert<T>(p));
      }
      done += n;
    }
  }

 private:
  template <class T>
  T convert(const unsigned char* p) const {
    const Dtype& d = header_.dtype;
    if (d.kind == 'f') {
      if (d.size == 2) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return static_cast<T>(half_to_float(h));
      }
      if (d.size == 4) {
        float f;
        std::memcpy(&f, p, 4);
        return static_cast<T>(f);
      }
      double v;
      std::memcpy(&v, p, 8);
      return static_cast<T>(v);
    }
    switch (d.size) {
      case 1: return d.kind == 'i' ? static_cast<T>(static_cast<int8_t>(p[0])) : static_cast<T>(p[0]);
      case 2: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return d.kind == 'i' ? static_cast<T>(static_cast<int16_t>(v)) : static_cast<T>(v);
      }
      case 4: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return d.kind == 'i' ? static_cast<T>(static_cast<int32_t>(v)) : static_cast<T>(v);
      }
      default: {
        uint64_t v;
        std::memcpy(&v, p, 8);
        // Callers range-check; clamp u64 beyond int64 so it stays out of range, not negative.
        if (d.kind == 'u' && v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          return static_cast<T>(std::numeric_limits<int64_t>::max());
        return d.kind == 'i' ? static_cast<T>(static_cast<int64_t>(v)) : static_cast<T>(v);
      }
    }
  }

  void read_bytes(void* dst, size_t n, const char* what) {
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (in_.gcount() != static_cast<std::streamsize>(n))
      throw InputError(path_ + ": truncated " + what + " (file is " + std::to_string(file_size_) +
                       " bytes)");
  }

  NpyHeader read_header() {
    char magic[kMagicLen];
    if (file_size_ < kMagicLen + 2)
      throw InputError(path_ + ": too short to be a .npy file (" + std::to_string(file_size_) +
                       " bytes)");
    read_bytes(magic, kMagicLen, "magic");
    if (std::memcmp(magic, kMagic, kMagicLen) != 0)
      throw InputError(path_ + ": bad magic, not a .npy file (expected \\x93NUMPY at the start)");
    unsigned char version[2];
    read_bytes(version, 2, "version");
    uint32_t header_len = 0;
    if (version[0] == 1 && version[1] == 0) {
      unsigned char b[2];
      read_bytes(b, 2, "header length");
      header_len = uint32_t{b[0]} | (uint32_t{b[1]} << 8);
    } else if ((version[0] == 2 || version[0] == 3) && version[1] == 0) {
      unsigned char b[4];
      read_bytes(b, 4, "header length");
      header_len = uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) |
                   (uint32_t{b[3]} << 24);
    } else {
      throw InputError(path_ + ": unsupported .npy format version " + std::to_string(version[0]) +
                       "." + std::to_string(version[1]) + " (supported: 1.0, 2.0, 3.0)");
    }
    const uint64_t prefix = static_cast<uint64_t>(in_.tellg());
    if (header_len > kMaxHeaderLen)
      throw InputError(path_ + ": .npy header length " + std::to_string(header_len) +
                       " exceeds the limit of " + std::to_string(kMaxHeaderLen) + " bytes");
    if (prefix + header_len > file_size_)
      throw InputError(path_ + ": truncated header (declares " + std::to_string(header_len) +
                       " bytes, file has " + std::to_string(file_size_ - prefix) + " after the prefix)");
    std::string text(header_len, '\0');
    read_bytes(text.data(), header_len, "header");
    // Versions 1 and 2 are latin-1 and 3 is UTF-8; every valid header is plain ASCII anyway,
    // and the parser rejects anything it does not understand.
    if (text.find('\0') != std::string::npos)
      throw InputError(path_ + ": malformed .npy header: contains a NUL byte");

    const PyValue dict = HeaderParser(text, path_).parse();
    if (dict.kind != PyValue::Dict)
      throw InputError(path_ + ": malformed .npy header: not a dictionary");
    const PyValue* descr = nullptr;
    const PyValue* fortran = nullptr;
    const PyValue* shape = nullptr;
    for (const auto& [key, value] : dict.entries) {
      if (key == "descr")
        descr = &value;
      else if (key == "fortran_order")
        fortran = &value;
      else if (key == "shape")
        shape = &value;
      else
        throw InputError(path_ + ": malformed .npy header: unexpected key '" + key + "'");
    }
    for (auto [field, name] : {std::pair{descr, "descr"}, std::pair{fortran, "fortran_order"},
                               std::pair{shape, "shape"}})
      if (!field) throw InputError(path_ + ": malformed .npy header: missing key '" + name + "'");
    if (descr->kind != PyValue::Str)
      throw InputError(path_ + ": unsupported dtype: structured arrays are not supported");
    if (fortran->kind != PyValue::Bool)
      throw InputError(path_ + ": malformed .npy header: fortran_order must be True or False");
    if (shape->kind != PyValue::Tuple)
      throw InputError(path_ + ": malformed .npy header: shape must be a tuple");

    NpyHeader h;
    h.dtype = parse_descr(descr->str, path_);
    h.fortran = fortran->flag;
    uint64_t elements = 1;
    bool overflow = false;
    for (const PyValue& dim : shape->items) {
      if (dim.kind != PyValue::Int || dim.num < 0)
        throw InputError(path_ + ": malformed .npy header: shape entries must be non-negative integers");
      h.shape.push_back(dim.num);
      const uint64_t n = static_cast<uint64_t>(dim.num);
      if (n != 0 && elements > (std::numeric_limits<uint64_t>::max() >> 4) / n) overflow = true;
      elements *= n;
    }
    h.data_offset = prefix + header_len;
    const uint64_t available = file_size_ - h.data_offset;
    // The guard above keeps elements * 8 within 64 bits whenever overflow is false.
    const uint64_t needed = elements * static_cast<uint64_t>(h.dtype.size);
    if (overflow || needed > available)
      throw InputError(path_ + ": truncated data: shape " + shape_text(h.shape) + " of " +
                       h.dtype.descr + " needs " +
                       (overflow ? std::string("more than 2^60") : std::to_string(needed)) +
                       " bytes, file has " + std::to_string(available) + " after the header");
    if (needed < available)
      throw InputError(path_ + ": " + std::to_string(available - needed) +
                       " unexpected bytes after the data of shape " + shape_text(h.shape) +
                       " (wrong shape in the header?)");
    h.elements = static_cast<int64_t>(elements);
    return h;
  }

 public:
  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) {
      s += std::to_string(shape[i]);
      if (i + 1 < shape.size() || shape.size() == 1) s += ",";
      if (i + 1 < shape.size()) s += " ";
    }
    return s + ")";
  }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t file_size_ = 0;
  NpyHeader header_;
};

// ---- Writing --------------------------------------------------------------------------------

std::string make_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " +
                     NpyReader::shape_text(shape) + ", }";
  // numpy pads with spaces and a final newline so that the data starts 64-byte aligned.
  const size_t prefix = kMagicLen + 2 + 2;
  size_t total = prefix + dict.size() + 1;
  const size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict.push_back('\n');
  if (dict.size() > 0xFFFF) throw InputError("npy: header too long for format 1.0");
  std::string out(kMagic, kMagicLen);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xFF));
  out.push_back(static_cast<char>((dict.size() >> 8) & 0xFF));
  return out + dict;
}

// Little-endian bytes of a value, whatever the host.
template <class U>
void put_le(std::vector<unsigned char>& out, U v) {
  for (size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

// Writes to a temporary name and renames, so a crash never leaves a half-written file under
// the real name, where a later read would take it for data.
void write_file(const std::string& path, const std::string& header,
                const std::vector<unsigned char>& data) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path + ": cannot open for writing");
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw InputError(path + ": write failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(path + ": cannot rename the written file into place");
  }
}

}  // namespace

MatrixF read_npy_features(const std::string& path) {
  NpyReader reader(path);
  const NpyHeader& h = reader.header();
  if (h.dtype.kind != 'f')
    throw InputError(path + ": features must be float16, float32 or float64, not '" +
                     h.dtype.descr + "'");
  if (h.shape.size() != 2)
    throw InputError(path + ": features must have rank 2 (samples, dims), got shape " +
                     NpyReader::shape_text(h.shape));
  const int64_t n = h.shape[0], d = h.shape[1];
  MatrixF X(n, d);
  // The first bad element in row-major order, which is what a user looks at, and whether it
  // was finite in the file (a float64 beyond float32's range) or NaN/Inf already.
  int64_t bad = -1;
  bool narrowed_overflow = false;
  const bool native_f4 = h.dtype.size == 4 && h.dtype.little == host_is_little();
  if (native_f4 && (!h.fortran || d == 1 || n == 1)) {
    // The common case (numpy's default for float32): the file is our row-major layout.
    reader.read_raw(X.data(), static_cast<uint64_t>(X.size()) * 4);
    const float* p = X.data();
    for (int64_t k = 0; k < X.size(); ++k)
      if (!std::isfinite(p[k])) {
        bad = k;
        break;
      }
  } else {
    // Fortran order stores column after column; map each element to its (row, column).
    reader.for_each<double>([&](int64_t k, double v) {
      const int64_t i = h.fortran ? k % n : k / d;
      const int64_t j = h.fortran ? k / n : k % d;
      const float f = static_cast<float>(v);
      X(i, j) = f;
      if (!std::isfinite(f) && (bad < 0 || i * d + j < bad)) {
        bad = i * d + j;
        narrowed_overflow = std::isfinite(v);
      }
    });
  }
  if (bad >= 0) {
    const std::string where =
        "row " + std::to_string(bad / d) + ", column " + std::to_string(bad % d);
    if (narrowed_overflow)
      throw InputError(path + ": value at " + where + " is too large for float32");
    throw InputError(path + ": non-finite value (" + std::to_string(X(bad / d, bad % d)) +
                     ") at " + where);
  }
  return X;
}

Labels read_npy_labels(const std::string& path) {
  NpyReader reader(path);
  const NpyHeader& h = reader.header();
  if (h.dtype.kind != 'i' && h.dtype.kind != 'u')
    throw InputError(path + ": labels must have an integer dtype, not '" + h.dtype.descr + "'");
  const bool column = h.shape.size() == 2 && h.shape[1] == 1;
  if (h.shape.size() != 1 && !column)
    throw InputError(path + ": labels must have shape (n,) or (n, 1), got " +
                     NpyReader::shape_text(h.shape));
  Labels y(static_cast<size_t>(h.shape[0]));
  int64_t bad_index = -1, bad_value = 0;
  reader.for_each<int64_t>([&](int64_t k, int64_t v) {
    if (bad_index < 0 && (v < 0 || v > kMaxLabel)) {
      bad_index = k;
      bad_value = v;
    }
    y[static_cast<size_t>(k)] = static_cast<int32_t>(v);
  });
  if (bad_index >= 0) {
    if (bad_value < 0)
      throw InputError(path + ": negative label " + std::to_string(bad_value) + " at index " +
                       std::to_string(bad_index));
    throw InputError(path + ": label " + std::to_string(bad_value) + " at index " +
                     std::to_string(bad_index) + " is too large");
  }
  return y;
}

void write_npy_features(const std::string& path, const MatrixF& X, NpyFloat dtype) {
  const bool half = dtype == NpyFloat::Float16;
  const size_t item = half ? 2 : 4;
  std::vector<unsigned char> data(static_cast<size_t>(X.size()) * item);
  const bool little = host_is_little();
  unsigned char* out = data.data();
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index j = 0; j < X.cols(); ++j, out += item) {
      const float f = X(i, j);
      if (half) {
        const uint16_t h = float_to_half(f);
        if (std::isfinite(f) && (h & 0x7C00u) == 0x7C00u)
          throw InputError(path + ": value " + std::to_string(f) + " at row " + std::to_string(i) +
                           ", column " + std::to_string(j) +
                           " overflows float16 (max 65504); write float32 instead");
        std::memcpy(out, &h, 2);
      } else {
        std::memcpy(out, &f, 4);
      }
      if (!little) std::reverse(out, out + item);
    }
  write_file(path, make_header(half ? "<f2" : "<f4", {X.rows(), X.cols()}), data);
}

void write_npy_labels(const std::string& path, const Labels& y) {
  std::vector<unsigned char> data;
  data.reserve(y.size() * 4);
  for (int32_t v : y) put_le(data, static_cast<uint32_t>(v));
  write_file(path, make_header("<i4", {static_cast<int64_t>(y.size())}), data);
}

int infer_num_classes(const int32_t* y, int64_t n, const std::string& where, const std::string& option) {
  if (n == 0)
    throw InputError(where + ": holds no labels (no samples), so the number of classes cannot be inferred from it");
  const int64_t max_label = *std::max_element(y, y + n);
  if (max_label + 1 > kMaxInferredClasses)
    throw InputError(where + ": largest label " + std::to_string(max_label) + " implies more than " +
                     std::to_string(kMaxInferredClasses) + " classes; pass the number of classes explicitly (" +
                     option + ") if this is intended");
  // One stray large label would make a million mostly empty classes (and heads that size):
  // a class count far above the labels that occur has to be asked for.
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(max_label + 1, 0)));
  int64_t distinct = 0;
  for (int64_t i = 0; i < n; ++i)
    if (y[i] >= 0 && !seen[static_cast<size_t>(y[i])]) seen[static_cast<size_t>(y[i])] = true, ++distinct;
  if (max_label + 1 > 1024 && max_label + 1 > 4 * distinct)
    throw InputError(where + ": the largest label, " + std::to_string(max_label) + ", implies " +
                     std::to_string(max_label + 1) + " classes, but only " + std::to_string(distinct) +
                     " distinct labels occur; give the number of classes (" + option + ") if that is intended");
  return static_cast<int>(max_label + 1);
}

Features load_npy_dataset(const std::string& x_path, const std::string& y_path, int num_classes) {
  if (num_classes < 0)
    throw InputError("number of classes must be positive, or 0 to infer it (got " +
                     std::to_string(num_classes) + ")");
  Features f;
  f.X = read_npy_features(x_path);
  f.y = read_npy_labels(y_path);
  if (static_cast<int64_t>(f.y.size()) != f.size())
    throw InputError(x_path + " has " + std::to_string(f.size()) + " rows but " + y_path +
                     " has " + std::to_string(f.y.size()) + " labels");
  if (num_classes == 0) {
    f.num_classes = infer_num_classes(f.y.data(), static_cast<int64_t>(f.y.size()), y_path, "--num-classes");
  } else {
    f.num_classes = num_classes;
    for (size_t i = 0; i < f.y.size(); ++i)
      if (f.y[i] >= num_classes)
        throw InputError(y_path + ": label " + std::to_string(f.y[i]) + " at index " +
                         std::to_string(i) + " is not below the number of classes (" +
                         std::to_string(num_classes) + ")");
  }
  return f;
}

}  // namespace fednode
