#pragma once
// A tiny bitmap font for the PNG renderer: printable ASCII on a 5x7 grid (two rows more below
// the baseline for descenders), drawn for Volt.
#include <array>
#include <cstdint>
#include <string>

namespace volt::plot {

/// Glyph cell: 5 columns by 9 rows, capitals and digits 7 rows tall (the baseline under row 7),
/// descenders in rows 8 and 9; text advances 6 columns per character (one blank).
constexpr int kGlyphWidth = 5;
constexpr int kCapHeight = 7;
constexpr int kGlyphHeight = 9;
constexpr int kGlyphAdvance = 6;

/// The rows of `c` (bit 4 is the leftmost column). Characters outside printable ASCII
/// (and bytes of UTF-8 sequences) draw as '?'.
const std::array<uint8_t, kGlyphHeight>& glyph(char c);

/// Pixel width of `text` drawn at `scale` (each glyph pixel a scale x scale square).
inline int text_width(const std::string& text, int scale) {
  return text.empty() ? 0 : (static_cast<int>(text.size()) * kGlyphAdvance - 1) * scale;
}

}  // namespace volt::plot
