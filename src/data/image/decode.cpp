#include "volt/data/image/decode.h"

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

// jpeglib.h needs size_t and FILE declared before it.
#include <jerror.h>
#include <jpeglib.h>
#include <cstdio>

#include <cerrno>
#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "data/image/detail/jpeg_error.h"

namespace volt::data {
namespace {

constexpr const char* kFormats = "Volt decodes JPEG and PNG files";

std::string first_bytes(const uint8_t* data, size_t size) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < size && i < 8; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", data[i]);
    if (i > 0) out += ' ';
    out += buf;
  }
  return out;
}

// PIL's rgb2l (libImaging/Convert.c's L24): the 601-2 luma weights in 16-bit fixed point.
inline uint8_t luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
}

// Decoded pixels before they become a tensor.
// The decoder writes straight into `pixels`, a [height, width, channels] tensor; it is the
// result when its channels are the mode's.
struct Raw {
  at::Tensor pixels;
  int height = 0;
  int width = 0;
  int channels = 0;  // 1 L, 2 LA, 3 RGB, 4 RGBA

  uint8_t* allocate() {
    pixels = at::empty({height, width, channels}, at::kByte);
    return pixels.data_ptr<uint8_t>();
  }
};

// The most pixels an image may have: 2^28 (768 MiB as RGB).
constexpr uint64_t kMaxPixels = uint64_t{1} << 28;

// To the mode's channels, dropping alpha without compositing as PIL's convert does.
at::Tensor to_mode(Raw& raw, ImageMode mode) {
  const int64_t c = mode == ImageMode::kRGB ? 3 : 1;
  if (raw.channels == c) return raw.pixels;
  const int64_t n = static_cast<int64_t>(raw.height) * raw.width, sc = raw.channels;
  at::Tensor out = at::empty({raw.height, raw.width, c}, at::kByte);
  uint8_t* dst = out.data_ptr<uint8_t>();
  const uint8_t* src = raw.pixels.data_ptr<uint8_t>();
  if (sc <= 2) {  // L or LA
    if (c == 3) {
      for (int64_t i = 0; i < n; ++i) dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = src[sc * i];
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = src[sc * i];
    }
  } else {  // RGB or RGBA
    if (c == 1) {
      for (int64_t i = 0; i < n; ++i) dst[i] = luma(src + sc * i);
    } else {
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + 3 * i, src + sc * i, 3);
    }
  }
  return out;
}

// ---- JPEG ----------------------------------------------------------------------------------
using detail::JpegErrorManager;

// libjpeg only warns when the data ends early and fills the rest with grey; PIL refuses such a
// file ("image file is truncated") and so does Volt. Other warnings (extraneous bytes before a
// marker, ...) are what PIL ignores too.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "the file is truncated (the JPEG data ends before the image)");
    std::longjmp(err->jump, 1);
  }
}

enum class JpegResult { kOk, kError, kCmyk };

// Only plain data lives in this frame between setjmp and a longjmp back to it; `raw` belongs
// to the caller, so nothing with a destructor is skipped by the jump.
JpegResult decode_jpeg_raw(const uint8_t* data, size_t size, Raw& raw, char* message) {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = detail::jpeg_error_exit;
  err.pub.emit_message = jpeg_on_message;
  err.message[0] = '\0';
  if (setjmp(err.jump)) {
    std::memcpy(message, err.message, sizeof(err.message));
    jpeg_destroy_decompress(&cinfo);
    return JpegResult::kError;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    jpeg_destroy_decompress(&cinfo);
    return JpegResult::kCmyk;
  }
  // Grayscale files stay one channel (PIL's mode L); colour ones become RGB.
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  raw.height = static_cast<int>(cinfo.output_height);
  raw.width = static_cast<int>(cinfo.output_width);
  raw.channels = cinfo.output_components;
  if (static_cast<uint64_t>(raw.height) * static_cast<uint64_t>(raw.width) > kMaxPixels) {
    std::snprintf(message, JMSG_LENGTH_MAX, "its %d x %d pixels are more than the 2^28 Volt decodes", raw.width,
                  raw.height);
    jpeg_destroy_decompress(&cinfo);
    return JpegResult::kError;
  }
  const size_t stride = static_cast<size_t>(raw.width) * static_cast<size_t>(raw.channels);
  uint8_t* pixels = raw.allocate();  // the temporary Tensor is gone before libjpeg runs again
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels + stride * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return JpegResult::kOk;
}

// ---- PNG -----------------------------------------------------------------------------------
struct PngReader {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char message[256];
};

void png_on_error(png_structp png, png_const_charp msg) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof(reader->message), "%s", msg);
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // ancillary-chunk trouble PIL ignores too

void png_read_memory(png_structp png, png_bytep out, png_size_t n) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (reader->size - reader->pos < n) {
    std::snprintf(reader->message, sizeof(reader->message), "the file is truncated (the PNG data ends early)");
    png_longjmp(png, 1);
  }
  std::memcpy(out, reader->data + reader->pos, n);
  reader->pos += n;
}

bool decode_png_raw(PngReader& reader, Raw& raw, std::vector<png_bytep>& rows) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, png_on_error, png_on_warning);
  if (png == nullptr) {
    std::snprintf(reader.message, sizeof(reader.message), "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(reader.message, sizeof(reader.message), "out of memory");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &reader, png_read_memory);
  // Refuse absurd sizes before allocating: 2^15 x 2^15 (3 GiB of RGB) at most.
  png_set_user_limits(png, 1u << 15, 1u << 15);
  png_read_info(png, info);
  const int color_type = png_get_color_type(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth == 16) png_set_strip_16(png);
  // Alpha (its own, or from a tRNS chunk that the palette expansion turns into alpha) is
  // dropped after the read, as PIL's convert drops it.
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  raw.height = static_cast<int>(png_get_image_height(png, info));
  raw.width = static_cast<int>(png_get_image_width(png, info));
  raw.channels = png_get_channels(png, info);
  if (static_cast<uint64_t>(raw.height) * static_cast<uint64_t>(raw.width) > kMaxPixels) {
    png_error(png, "its pixels are more than the 2^28 Volt decodes");
  }
  const size_t stride = static_cast<size_t>(raw.width) * static_cast<size_t>(raw.channels);
  if (png_get_rowbytes(png, info) != stride) png_error(png, "unexpected row size after conversion to 8 bits");
  uint8_t* pixels = raw.allocate();
  rows.resize(static_cast<size_t>(raw.height));
  for (int y = 0; y < raw.height; ++y) rows[static_cast<size_t>(y)] = pixels + stride * static_cast<size_t>(y);
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

}  // namespace

const char* to_string(ImageMode mode) {
  return mode == ImageMode::kRGB ? "RGB" : "L";
}

at::Tensor decode_image(const uint8_t* data, size_t size, ImageMode mode, const std::string& name) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Raw raw;
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) {
    PngReader reader{data, size, 0, {0}};
    std::vector<png_bytep> rows;
    if (!decode_png_raw(reader, raw, rows)) {
      throw DataError("image " + quote_path(name) + " is not a readable PNG file: " + reader.message +
                      ". Replace or remove the file (ImageFolder can skip such files with skip_corrupt).");
    }
  } else if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
    char message[JMSG_LENGTH_MAX] = {0};
    const JpegResult result = decode_jpeg_raw(data, size, raw, message);
    if (result == JpegResult::kCmyk) {
      throw NotSupportedError("image " + quote_path(name) +
                              " is a CMYK JPEG; Volt decodes grayscale and YCbCr/RGB JPEGs. Convert it to RGB "
                              "(e.g. with PIL: Image.open(f).convert('RGB').save(f)).");
    }
    if (result == JpegResult::kError) {
      throw DataError("image " + quote_path(name) + " is not a readable JPEG file: " + message +
                      ". Replace or remove the file (ImageFolder can skip such files with skip_corrupt).");
    }
  } else if (size == 0) {
    throw DataError("image " + quote_path(name) + " is empty (0 bytes). " + kFormats + "; replace or remove it.");
  } else {
    throw DataError("image " + quote_path(name) + " is neither JPEG nor PNG (its first bytes are " +
                    first_bytes(data, size) + "). " + kFormats + "; convert it or remove it.");
  }
  if (raw.height <= 0 || raw.width <= 0) {
    throw DataError("image " + quote_path(name) + " has no pixels (" + std::to_string(raw.width) + "x" +
                    std::to_string(raw.height) + "). Replace or remove it.");
  }
  return to_mode(raw, mode);
}

at::Tensor read_image(const std::string& path, ImageMode mode) {
  if (const std::string why = regular_file_problem(path, "image"); !why.empty()) throw DataError(why);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw DataError("image " + quote_path(path) + " cannot be opened: " + std::strerror(errno) + ".");
  }
  std::vector<uint8_t> bytes;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      throw DataError("image " + quote_path(path) + " cannot be read: " + std::strerror(e) + ".");
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  ::close(fd);
  return decode_image(bytes.data(), bytes.size(), mode, path);
}

}  // namespace volt::data
