#include "features/images.h"

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <map>
#include <set>
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

// libpng, like libjpeg, reports fatal errors by longjmp; decode_png_raw keeps its state in the
// caller's PngJob and constructs nothing with a destructor, so the jump skips no cleanup.
struct PngJob {
  const uint8_t* data;
  size_t size;
  size_t offset;
  Image* out;
  char message[256];
  const char* limit_error;  // set when the header asks for more than we allow
  png_structp png;
  png_infop info;
  std::vector<png_bytep>* rows;
};

extern "C" void fednode_png_error(png_structp png, png_const_charp message) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  std::snprintf(job->message, sizeof job->message, "%s", message);
  png_longjmp(png, 1);
}

extern "C" void fednode_png_warning(png_structp, png_const_charp) {}

extern "C" void fednode_png_read(png_structp png, png_bytep into, png_size_t length) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  if (length > job->size - job->offset) png_error(png, "file ends early (truncated)");
  std::memcpy(into, job->data + job->offset, length);
  job->offset += length;
}

// Returns true on success; on failure job->message or job->limit_error says why. What PIL's
// Image.open(...).convert("RGB" or "L") gives, which torchvision's loader uses: 16-bit samples
// keep their high byte (PIL does so for colour; for 16-bit grayscale it clips to 255 instead,
// which fednode does not copy), palettes become RGB, 1/2/4-bit gray is scaled to 8 bits, alpha
// and tRNS transparency are dropped without compositing, and gAMA/sRGB/iCCP chunks are ignored.
bool decode_png_raw(PngJob* job) {
  job->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, fednode_png_error, fednode_png_warning);
  if (!job->png) {
    job->limit_error = "libpng could not start";
    return false;
  }
  job->info = png_create_info_struct(job->png);
  if (!job->info || setjmp(png_jmpbuf(job->png))) {
    png_destroy_read_struct(&job->png, job->info ? &job->info : nullptr, nullptr);
    return false;
  }
  png_set_read_fn(job->png, job, fednode_png_read);
  // The pixel limit below is the real bound; this only stops libpng from refusing large widths.
  png_set_user_limits(job->png, 0x7fffffffu, 0x7fffffffu);
  png_read_info(job->png, job->info);
  const png_uint_32 width = png_get_image_width(job->png, job->info);
  const png_uint_32 height = png_get_image_height(job->png, job->info);
  if (static_cast<int64_t>(width) * height > kMaxImagePixels || width == 0 || height == 0) {
    job->limit_error = "its header claims no pixels or more than the 67108864 (64 Mi) fednode accepts";
    png_destroy_read_struct(&job->png, &job->info, nullptr);
    return false;
  }
  const int color_type = png_get_color_type(job->png, job->info);
  if (png_get_bit_depth(job->png, job->info) == 16) png_set_strip_16(job->png);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(job->png);
  if (color_type == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(job->png);
  if (color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(job->png);
  png_set_interlace_handling(job->png);
  png_read_update_info(job->png, job->info);
  const int channels = png_get_channels(job->png, job->info);
  if ((channels != 1 && channels != 3) || png_get_bit_depth(job->png, job->info) != 8) {
    job->limit_error = "a sample layout fednode does not expect after conversion to 8-bit gray or RGB";
    png_destroy_read_struct(&job->png, &job->info, nullptr);
    return false;
  }
  job->out->pixel_share = take_pixel_share(int64_t{width} * height);
  job->out->width = static_cast<int>(width);
  job->out->height = static_cast<int>(height);
  job->out->channels = channels;
  job->out->pixels.resize(static_cast<size_t>(width) * height * channels);
  job->rows->resize(height);
  for (png_uint_32 y = 0; y < height; ++y)
    (*job->rows)[y] = job->out->pixels.data() + static_cast<size_t>(y) * width * channels;
  png_read_image(job->png, job->rows->data());
  png_read_end(job->png, nullptr);
  png_destroy_read_struct(&job->png, &job->info, nullptr);
  return true;
}

Image decode_png(const std::vector<uint8_t>& bytes, const std::string& where) {
  Image out;
  std::vector<png_bytep> rows;
  PngJob job;
  std::memset(&job, 0, sizeof job);
  job.data = bytes.data();
  job.size = bytes.size();
  job.out = &out;
  job.rows = &rows;
  if (!decode_png_raw(&job)) {
    if (job.limit_error) throw InputError(where + ": " + job.limit_error);
    throw InputError(where + ": invalid PNG: " + job.message);
  }
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

// A CMYK image as libjpeg decodes it into RGB, in place, as PIL does it (and so torchvision's
// loader): PIL reads every CMYK JPEG as Adobe's inverted CMYK ("CMYK;I"), so C = 255 - c etc.,
// then R = (255 - K) - C (255 - K) / 255, rounded as PIL's MULDIV255. With the inversion that is
// R = k - round(255 - c, k) where c and k are the decoded samples.
void cmyk_to_rgb(Image* image) {
  auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  std::vector<uint8_t>& p = image->pixels;
  const size_t n = p.size() / 4;
  for (size_t i = 0; i < n; ++i) {
    const int nk = p[4 * i + 3];  // 255 - K, K being 255 minus the decoded sample
    for (int c = 0; c < 3; ++c) p[3 * i + c] = static_cast<uint8_t>(nk - muldiv255(255 - p[4 * i + c], nk));
  }
  p.resize(n * 3);
  p.shrink_to_fit();
  image->channels = 3;
}

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
  const J_COLOR_SPACE space = job->cinfo.jpeg_color_space;
  const bool gray = space == JCS_GRAYSCALE;
  // libjpeg cannot turn CMYK into RGB; it hands back CMYK (YCCK converted to it) for cmyk_to_rgb.
  const bool cmyk = space == JCS_CMYK || space == JCS_YCCK;
  job->cinfo.out_color_space = gray ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&job->cinfo);
  const int64_t w = job->cinfo.output_width, h = job->cinfo.output_height;
  const int channels = job->cinfo.output_components;
  if (w <= 0 || h <= 0 || w * h > kMaxImagePixels || channels != (gray ? 1 : cmyk ? 4 : 3)) {
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
  if (cmyk) cmyk_to_rgb(job->out);
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

// The images under root/cls, as torchvision's ImageFolder walks them (os.walk following links,
// folders in sorted order of their path, then files sorted by name): "cls/a.png" comes before
// "cls/sub/b.png", and "cls/sub/b.png" before "cls/sub2/c.png". A folder reached again through a
// link is walked once. Other files are added to `ignored`.
std::vector<std::string> list_class_images(const fs::path& root, const std::string& cls,
                                           std::vector<std::string>* ignored) {
  std::vector<std::pair<std::string, std::string>> found;  // (folder relative to root, file name)
  std::set<fs::path> walked;
  std::vector<std::string> folders_left{cls};
  while (!folders_left.empty()) {
    const std::string dir = folders_left.back();
    folders_left.pop_back();
    std::error_code ec;
    const fs::path canonical = fs::canonical(root / dir, ec);
    if (ec || !walked.insert(canonical).second) continue;
    for (const auto& entry : fs::directory_iterator(root / dir, ec)) {
      const fs::path& p = entry.path();
      if (hidden(p)) continue;
      const std::string name = p.filename().string();
      std::error_code type_ec;
      if (entry.is_directory(type_ec)) {
        folders_left.push_back(dir + "/" + name);
      } else if (has_image_extension(p) && entry.is_regular_file(type_ec)) {
        found.emplace_back(dir, name);
      } else if (ignored) {
        ignored->push_back(dir + "/" + name);
      }
    }
    if (ec) throw InputError((root / dir).string() + ": cannot list folder: " + ec.message());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  files.reserve(found.size());
  for (const auto& [dir, name] : found) files.push_back(dir + "/" + name);
  return files;
}

}  // namespace

Image decode_image(const std::vector<uint8_t>& bytes, const std::string& where) {
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), png_sig, 8) == 0) return decode_png(bytes, where);
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF)
    return decode_jpeg(bytes, where);
  if (bytes.empty()) throw InputError(where + ": empty file (0 bytes)");
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
    per_class[c] = list_class_images(fs::path(root), folder.class_names[c], &folder.ignored);
    if (per_class[c].empty())
      throw InputError((fs::path(root) / folder.class_names[c]).string() +
                       ": class folder holds no .png, .jpg or .jpeg file, in it or in its sub-folders");
  }
  std::sort(folder.ignored.begin(), folder.ignored.end());

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

ImageFolder scan_images_to_classify(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw InputError(root + ": not a folder of images");
  bool loose_images = false;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    std::error_code type_ec;
    if (!hidden(entry.path()) && has_image_extension(entry.path()) && entry.is_regular_file(type_ec)) loose_images = true;
  }
  if (ec) throw InputError(root + ": cannot list folder: " + ec.message());
  if (!loose_images) return scan_image_folder(root);
  ImageFolder folder;
  folder.root = root;
  for (std::string& file : list_class_images(fs::path(root), ".", &folder.ignored))
    folder.files.push_back(file.substr(2));  // "./a/b.png" -> "a/b.png"
  for (std::string& file : folder.ignored) file = file.substr(2);
  std::sort(folder.ignored.begin(), folder.ignored.end());
  return folder;
}

}  // namespace fednode
