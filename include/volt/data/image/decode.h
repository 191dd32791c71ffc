#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace volt::data {

/// The pixel layout an image is decoded into (PIL's modes of the same names).
enum class ImageMode {
  /// 3 channels, red, green, blue: PIL's convert("RGB"). Grayscale files are replicated to three
  /// channels; alpha and PNG transparency are dropped (not composited), as PIL drops them.
  kRGB,
  /// 1 channel of luma: PIL's convert("L"), L = (19595 R + 38470 G + 7471 B + 32768) >> 16 on
  /// the decoded RGB (ITU-R 601-2 weights 0.299, 0.587, 0.114 in 16-bit fixed point).
  kL,
};

/// "RGB" or "L".
const char* to_string(ImageMode mode);

/// Decodes a JPEG (libjpeg-turbo) or PNG (libpng) file into a uint8 tensor [H, W, C] in
/// row-major order (PIL's / numpy's layout; ToTensor turns it into float [C, H, W]): C = 3 for
/// kRGB, 1 for kL. The format is told by the file's first bytes, not by its name.
///
/// JPEG is decoded as PIL 9 decodes it (libjpeg's default integer DCT and fancy upsampling),
/// PNG with every bit depth and colour type (16-bit samples keep their high byte; palettes
/// are expanded). Throws DataError naming the file when it is missing, not a regular file,
/// empty, neither JPEG nor PNG, corrupt or truncated; NotSupportedError for a CMYK JPEG.
at::Tensor read_image(const std::string& path, ImageMode mode = ImageMode::kRGB);

/// As read_image, from bytes in memory; `name` is used in messages (e.g. the file name).
at::Tensor decode_image(const uint8_t* data, size_t size, ImageMode mode, const std::string& name);

/// Writes a uint8 [H, W, C] tensor (C = 1 or 3) as a PNG file (libpng, default compression).
/// The file is written to a temporary name next to `path`, flushed and renamed, so `path` is
/// either the old file or the whole new one. Throws ConfigError for a tensor of another shape
/// or dtype, DataError when the file cannot be written.
void write_png(const std::string& path, const at::Tensor& image);

/// Writes a uint8 [H, W, C] tensor (C = 1 or 3) as a baseline JPEG file (libjpeg-turbo,
/// `quality` 1 .. 100, 4:2:0 chroma subsampling for colour), as write_png writes its file.
void write_jpeg(const std::string& path, const at::Tensor& image, int quality = 90);

}  // namespace volt::data
