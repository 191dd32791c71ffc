#include "loggers/detail/png_encoder.h"

#include <png.h>

#include <cstring>
#include <string>

#include "volt/core/error.h"

namespace volt::loggers::detail {

std::string encode_png(const uint8_t* pixels, int64_t height, int64_t width, int64_t channels) {
  // libpng's simplified API reports errors through the image struct, not longjmp, so no
  // C++ object lives across a non-local jump.
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = channels == 1 ? PNG_FORMAT_GRAY : channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, pixels, 0, nullptr)) {
    const std::string why = image.message;
    png_image_free(&image);
    throw Error("encoding a " + std::to_string(width) + "x" + std::to_string(height) + " PNG failed: " + why);
  }
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, pixels, 0, nullptr)) {
    const std::string why = image.message;
    png_image_free(&image);
    throw Error("encoding a " + std::to_string(width) + "x" + std::to_string(height) + " PNG failed: " + why);
  }
  out.resize(size);
  return out;
}

}  // namespace volt::loggers::detail
