#include "features/images.h"

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <map>
#include <mutex>
#include <thread>
#include <cctype>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace fednode {

namespace {

constexpr uintmax_t kMaxImageFileBytes = uintmax_t(256) << 20;

std::vector<uint8_t> read_file(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw InputError(path + ": cannot read image file: " + ec.message());
  if (size > kMaxImageFileBytes)
    throw InputError(path + ": " + std::to_string(size) + " bytes, more than the 256 MiB allowed for one image");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open image file");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size)) throw InputError(path + ": short read");
  return bytes;
}

// The shares of kMaxPixelsInFlight. A thread that holds a share already takes the next one
// without waiting: it may be the one whose share the others wait for (FolderSource drops its
// previous image first, so the pipeline never does this; an application keeping images might).
class PixelBudget {
 public:
  void take(int64_t n, std::thread::id owner) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (held_[owner] == 0) freed_.wait(lock, [&] { return used_ + n <= kMaxPixelsInFlight; });
    used_ += n;
    held_[owner] += n;
  }
  void give_back(int64_t n, std::thread::id owner) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      used_ -= n;
      if ((held_[owner] -= n) == 0) held_.erase(owner);
    }
    freed_.notify_all();
  }
  int64_t used() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return used_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  int64_t used_ = 0;
  std::map<std::thread::id, int64_t> held_;
};

PixelBudget& budget() {
  static PixelBudget b;
  return b;
}

std::shared_ptr<const void> take_pixel_share(int64_t pixels) {
  const std::thread::id owner = std::this_thread::get_id();
  budget().take(pixels, owner);
  return std::shared_ptr<const void>(nullptr, [pixels, owner](const void*) { budget().give_back(pixels, owner); });
}

void check_dimensions(int64_t width, int64_t height, const std::string& where) {
  if (width <= 0 || height <= 0 || width * height > kMaxImagePixels)
    throw InputError(where + ": image of " + std::to_string(width) + "x" + std::to_string(height) +
                     " pixels is empty or larger than the " + std::to_string(kMaxImagePixels) +
                     "-pixel limit");
}

Image decode_png(const std::vector<uint8_t>& bytes, const std::string& where) {
  // The simplified API (libpng >= 1.6) handles every bit depth, palette and transparency form and
  // catches libpng's longjmp-based errors itself, reporting them in image.message.
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()))
    throw InputError(where + ": invalid PNG: " + image.message);
  const bool color = image.format & PNG_FORMAT_FLAG_COLOR;
  const bool alpha = image.format & PNG_FORMAT_FLAG_ALPHA;
  try {
    check_dimensions(image.width, image.height, where);
  } catch (...) {
    png_image_free(&image);
    throw;
  }
  Image out;
  out.pixel_share = take_pixel_share(int64_t{image.width} * image.height);
  image.format = color ? (alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB) : (alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY);
  const int read_channels = static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(image.format));
  std::vector<uint8_t> buffer(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, buffer.data(), 0, nullptr))
    throw InputError(where + ": invalid PNG: " + image.message);

  out.height = static_cast<int>(image.height);
  out.width = static_cast<int>(image.width);
  out.channels = color ? 3 : 1;
  if (!alpha) {
    out.pixels = std::move(buffer);
    return out;
  }
  const size_t n = static_cast<size_t>(out.height) * out.width;
  out.pixels.resize(n * out.channels);
  for (size_t i = 0; i < n; ++i)
    for (int c = 0; c < out.channels; ++c) out.pixels[i * out.channels + c] = buffer[i * read_channels + c];
  return out;
}

// libjpeg reports fatal errors by calling error_exit, which must not return: we longjmp back to
// decode_jpeg_raw. That function keeps its state in the caller's objects (never in its own locals
// modified after setjmp) and constructs nothing with a destructor, so the jump skips no cleanup.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

extern "C" void fednode_jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

extern "C" void fednode_jpeg_emit_message(j_common_ptr cinfo, int level) {
  // Warnings (level -1) are corrupt-data reports; a truncated file is the one that silently fills
  // the rest of the image with grey, so it becomes an error. The rest (extraneous bytes and the
  // like) decode fine, as PIL accepts them, and trace messages (level >= 0) are noise.
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* err = reinterpret_cast<JpegError*>(cinfo->err);
    err->truncated = true;
  }
}

extern "C" void fednode_jpeg_output_message(j_common_ptr) {}

// A progressive 64-megapixel image needs up to 384 MB of coefficients (three components of
// 16-bit values); anything asking libjpeg for more than this is refused.
constexpr long kMaxJpegDecoderBytes = 1L << 30;

struct JpegJob {
  jpeg_decompress_struct cinfo;
  JpegError err;
  const uint8_t* data;
  unsigned long size;
  Image* out;
  const char* limit_error;  // set when the header asks for more than we allow
};

// Returns true on success; on failure job->err.message or job->limit_error says why.
bool decode_jpeg_raw(JpegJob* job) {
  job->cinfo.err = jpeg_std_error(&job->err.mgr);
  job->err.mgr.error_exit = fednode_jpeg_error_exit;
  job->err.mgr.emit_message = fednode_jpeg_emit_message;
  job->err.mgr.output_message = fednode_jpeg_output_message;
  job->err.truncated = false;
  job->err.message[0] = '\0';
  job->limit_error = nullptr;
  if (setjmp(job->err.jump)) {
    jpeg_destroy_decompress(&job->cinfo);
    return false;
  }
  jpeg_create_decompress(&job->cinfo);
  jpeg_mem_src(&job->cinfo, job->data, job->size);
  jpeg_read_header(&job->cinfo, TRUE);
  // Checked before decompression starts: for a progressive file jpeg_start_decompress already
  // reads the whole image into coefficient buffers sized by the header, whatever the file's size.
  if (static_cast<int64_t>(job->cinfo.image_width) * job->cinfo.image_height > kMaxImagePixels) {
    job->limit_error = "its header claims more pixels than the 67108864 (64 Mi) fednode accepts";
    jpeg_destroy_decompress(&job->cinfo);
    return false;
  }
  // And a ceiling on what libjpeg may allocate at all (it has no backing store, so it fails
  // cleanly beyond this).
  job->cinfo.mem->max_memory_to_use = kMaxJpegDecoderBytes;
  // In the caller's Image, not in a local: a longjmp from libjpeg skips no destructor here.
  job->out->pixel_share = take_pixel_share(int64_t{job->cinfo.image_width} * job->cinfo.image_height);
  const bool gray = job->cinfo.jpeg_color_space == JCS_GRAYSCALE;
  job->cinfo.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&job->cinfo);
  const int64_t w = job->cinfo.output_width, h = job->cinfo.output_height;
  const int channels = job->cinfo.output_components;
  if (w <= 0 || h <= 0 || w * h > kMaxImagePixels || (channels != 1 && channels != 3)) {
    job->limit_error = "image dimensions or channel count outside what fednode accepts";
    jpeg_destroy_decompress(&job->cinfo);
    return false;
  }
  job->out->width = static_cast<int>(w);
  job->out->height = static_cast<int>(h);
  job->out->channels = channels;
  job->out->pixels.resize(static_cast<size_t>(w * h * channels));
  while (job->cinfo.output_scanline < job->cinfo.output_height) {
    JSAMPROW row = job->out->pixels.data() + static_cast<size_t>(job->cinfo.output_scanline) * w * channels;
    jpeg_read_scanlines(&job->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&job->cinfo);
  jpeg_destroy_decompress(&job->cinfo);
  return true;
}

Image decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& where) {
  Image out;
  JpegJob job;
  std::memset(&job, 0, sizeof job);
  job.data = bytes.data();
  job.size = static_cast<unsigned long>(bytes.size());
  job.out = &out;
  if (!decode_jpeg_raw(&job)) {
    if (job.limit_error) throw InputError(where + ": " + job.limit_error);
    throw InputError(where + ": invalid JPEG: " + job.err.message);
  }
  if (job.err.truncated) throw InputError(where + ": JPEG data ends early (truncated file)");
  return out;
}

bool has_image_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

}  // namespace

Image decode_image(const std::vector<uint8_t>& bytes, const std::string& where) {
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), png_sig, 8) == 0) return decode_png(bytes, where);
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF)
    return decode_jpeg(bytes, where);
  throw InputError(where + ": not a PNG or JPEG file (unrecognised signature)");
}

Image read_image(const std::string& path) { return decode_image(read_file(path), path); }

int64_t pixels_in_flight() { return budget().used(); }

ImageFolder scan_image_folder(const std::string& root, int64_t limit) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw InputError(root + ": not a folder (expected one sub-folder of images per class)");
  ImageFolder folder;
  folder.root = root;
  for (const auto& entry : fs::directory_iterator(root, ec))
    if (!hidden(entry.path()) && entry.is_directory()) folder.class_names.push_back(entry.path().filename().string());
  if (ec) throw InputError(root + ": cannot list folder: " + ec.message());
  if (folder.class_names.empty())
    throw InputError(root + ": no class sub-folders (expected " + root + "/<class>/<image>.png|jpg)");
  std::sort(folder.class_names.begin(), folder.class_names.end());

  std::vector<std::vector<std::string>> per_class(folder.class_names.size());
  for (size_t c = 0; c < folder.class_names.size(); ++c) {
    const fs::path dir = fs::path(root) / folder.class_names[c];
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const fs::path& p = entry.path();
      if (hidden(p) || !has_image_extension(p) || !entry.is_regular_file()) continue;
      per_class[c].push_back(folder.class_names[c] + "/" + p.filename().string());
    }
    if (ec) throw InputError(dir.string() + ": cannot list folder: " + ec.message());
    if (per_class[c].empty())
      throw InputError(dir.string() + ": class folder holds no .png, .jpg or .jpeg file");
    std::sort(per_class[c].begin(), per_class[c].end());
  }

  std::vector<size_t> keep(per_class.size(), 0);
  if (limit < 0) {
    for (size_t c = 0; c < per_class.size(); ++c) keep[c] = per_class[c].size();
  } else {
    int64_t taken = 0;
    for (bool progress = true; progress && taken < limit;) {
      progress = false;
      for (size_t c = 0; c < per_class.size() && taken < limit; ++c)
        if (keep[c] < per_class[c].size()) {
          ++keep[c];
          ++taken;
          progress = true;
        }
    }
  }
  for (size_t c = 0; c < per_class.size(); ++c)
    for (size_t i = 0; i < keep[c]; ++i) {
      folder.files.push_back(per_class[c][i]);
      folder.labels.push_back(static_cast<int32_t>(c));
    }
  return folder;
}

}  // namespace fednode
