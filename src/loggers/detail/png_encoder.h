#pragma once
#include <cstdint>
#include <string>

namespace volt::loggers::detail {

/// A PNG file (libpng) of 8-bit pixels, `channels` interleaved per pixel (1 grey, 3 RGB,
/// 4 RGBA), rows top to bottom. Throws volt::Error with libpng's message on failure.
std::string encode_png(const uint8_t* pixels, int64_t height, int64_t width, int64_t channels);

}  // namespace volt::loggers::detail
