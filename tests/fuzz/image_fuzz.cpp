// decode_image: the JPEG (libjpeg-turbo) and PNG (libpng) decoder behind read_image and ImageFolder. The
// first byte picks the mode (even: RGB, odd: L); the rest is the file. An accepted image must be a contiguous
// uint8 [H, W, C] tensor with C = 3 for RGB and 1 for L, at most 2^28 pixels, and decoding the same bytes in
// the other mode must accept them too, with the same height and width.
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

#include "fuzz_target.h"
#include "volt/core/error.h"
#include "volt/data/image/decode.h"

namespace {
constexpr const char* kImageTarget = "image";

std::string shape_text(const at::Tensor& t) {
  std::string out;
  for (int64_t d : t.sizes()) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}
}  // namespace

VOLT_FUZZ_TARGET(image) {
  if (size < 1) return 0;
  using volt::data::ImageMode;
  const ImageMode mode = data[0] % 2 == 0 ? ImageMode::kRGB : ImageMode::kL;
  const ImageMode other = mode == ImageMode::kRGB ? ImageMode::kL : ImageMode::kRGB;
  at::Tensor image;
  try {
    image = volt::data::decode_image(data + 1, size - 1, mode, "input");
  } catch (const volt::Error&) {
    return 0;
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kImageTarget, e);
  }
  const int64_t channels = mode == ImageMode::kRGB ? 3 : 1;
  if (!image.defined() || image.dim() != 3 || image.scalar_type() != at::kByte || !image.is_contiguous() ||
      image.size(2) != channels || image.size(0) < 1 || image.size(1) < 1 ||
      image.size(0) * image.size(1) > (int64_t{1} << 28)) {
    volt::fuzz::crash(kImageTarget, "an accepted image decoded to a tensor that is not uint8 [H, W, " +
                                        std::to_string(channels) + "]: " + (image.defined() ? shape_text(image) : "undefined"));
  }
  at::Tensor again;
  try {
    again = volt::data::decode_image(data + 1, size - 1, other, "input");
  } catch (const std::exception& e) {
    volt::fuzz::crash(kImageTarget, std::string("an image accepted in one mode was refused in the other: ") + e.what());
  }
  if (again.size(0) != image.size(0) || again.size(1) != image.size(1)) {
    volt::fuzz::crash(kImageTarget, "the two modes decoded different sizes: " + shape_text(image) + " and " +
                                        shape_text(again));
  }
  return 0;
}
