#include <ATen/core/Tensor.h>
#include <fcntl.h>
#include <png.h>
#include <unistd.h>

#include <jpeglib.h>
#include <cstdio>

#include <cerrno>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/data/image/decode.h"
#include "data/image/detail/jpeg_error.h"

namespace volt::data {
namespace {

void check_image(const at::Tensor& image, const char* where) {
  if (!image.defined() || image.scalar_type() != at::kByte || image.dim() != 3 ||
      (image.size(2) != 1 && image.size(2) != 3) || image.size(0) < 1 || image.size(1) < 1 || image.size(0) > 65535 ||
      image.size(1) > 65535) {
    std::string got = "an undefined tensor";
    if (image.defined()) {
      got = std::string(c10::toString(image.scalar_type())) + " [";
      for (int64_t d = 0; d < image.dim(); ++d) got += (d > 0 ? ", " : "") + std::to_string(image.size(d));
      got += "]";
    }
    throw ConfigError(std::string(where) + " takes a uint8 image [H, W, C] with C = 1 or 3 and sides 1 .. 65535, got " +
                      got + ". Convert with image.to(at::kByte) and permute a [C, H, W] tensor to [H, W, C].");
  }
}

// The whole file or nothing: a temporary name in the same folder, fsync, rename.
void write_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    throw DataError("cannot write image " + quote_path(path) + ": " + std::strerror(errno) +
                    ". Check that its folder exists and is writable.");
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw DataError("cannot write image " + quote_path(path) + ": " + std::strerror(e) + ".");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw DataError("cannot write image " + quote_path(path) + ": " + std::strerror(e) + ".");
  }
}

struct PngWriter {
  std::vector<uint8_t>* out;
  char message[256];
};

void png_write_error(png_structp png, png_const_charp msg) {
  auto* writer = static_cast<PngWriter*>(png_get_error_ptr(png));
  std::snprintf(writer->message, sizeof(writer->message), "%s", msg);
  png_longjmp(png, 1);
}
void png_write_warning(png_structp, png_const_charp) {}
void png_write_memory(png_structp png, png_bytep data, png_size_t n) {
  auto* writer = static_cast<PngWriter*>(png_get_io_ptr(png));
  writer->out->insert(writer->out->end(), data, data + n);
}
void png_flush_memory(png_structp) {}

bool encode_png(PngWriter& writer, const uint8_t* pixels, int h, int w, int c, std::vector<png_bytep>& rows) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &writer, png_write_error, png_write_warning);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, &writer, png_write_memory, png_flush_memory);
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), 8,
               c == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  for (int y = 0; y < h; ++y)
    rows[static_cast<size_t>(y)] = const_cast<png_bytep>(pixels + static_cast<size_t>(y) * w * c);
  png_set_rows(png, info, rows.data());
  png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

using detail::JpegErrorManager;

// `buffer`/`size` are libjpeg's (malloc'ed by jpeg_mem_dest); the caller frees them.
bool encode_jpeg(const uint8_t* pixels, int h, int w, int c, int quality, unsigned char** buffer, unsigned long* size,
                 char* message) {
  jpeg_compress_struct cinfo;
  JpegErrorManager err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = detail::jpeg_error_exit;
  if (setjmp(err.jump)) {
    std::memcpy(message, err.message, sizeof(err.message));
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, buffer, size);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = c;
  cinfo.in_color_space = c == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels + static_cast<size_t>(cinfo.next_scanline) * w * c);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

}  // namespace

void write_png(const std::string& path, const at::Tensor& image) {
  check_image(image, "write_png");
  const at::Tensor img = image.contiguous();
  const int h = static_cast<int>(img.size(0)), w = static_cast<int>(img.size(1)), c = static_cast<int>(img.size(2));
  std::vector<uint8_t> bytes;
  PngWriter writer{&bytes, {0}};
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  if (!encode_png(writer, img.data_ptr<uint8_t>(), h, w, c, rows)) {
    throw DataError("cannot encode PNG " + quote_path(path) + ": " + writer.message + ".");
  }
  write_atomically(path, bytes);
}

void write_jpeg(const std::string& path, const at::Tensor& image, int quality) {
  check_image(image, "write_jpeg");
  if (quality < 1 || quality > 100) {
    throw ConfigError("write_jpeg: quality must be 1 .. 100, got " + std::to_string(quality) +
                      ". 90 is a common choice; 75 is libjpeg's default.");
  }
  const at::Tensor img = image.contiguous();
  const int h = static_cast<int>(img.size(0)), w = static_cast<int>(img.size(1)), c = static_cast<int>(img.size(2));
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  char message[JMSG_LENGTH_MAX] = {0};
  const bool ok = encode_jpeg(img.data_ptr<uint8_t>(), h, w, c, quality, &buffer, &size, message);
  std::vector<uint8_t> bytes;
  if (ok) bytes.assign(buffer, buffer + size);
  std::free(buffer);
  if (!ok) throw DataError("cannot encode JPEG " + quote_path(path) + ": " + message + ".");
  write_atomically(path, bytes);
}

}  // namespace volt::data
