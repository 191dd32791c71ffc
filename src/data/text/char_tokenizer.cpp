#include "volt/data/text/char_tokenizer.h"

#include <algorithm>
#include <set>
#include <string>

#include "data/text/detail/text_files.h"
#include "volt/core/error.h"

namespace volt::data {
namespace {

constexpr std::string_view kMagic = "volt-char-tokenizer 1\n";

// Every code point of `text`, or a DataError naming the byte offset (and `where`, e.g. the file).
template <typename Fn>
void for_each_code_point(std::string_view text, const std::string& where, Fn&& fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t at = pos;
    const int32_t cp = detail::next_code_point(text, &pos);
    if (cp < 0) {
      throw DataError("CharTokenizer: " + where + " is not valid UTF-8 at byte " + std::to_string(at) + " (byte 0x" +
                      detail::hex64(static_cast<unsigned char>(text[at])).substr(14) +
                      "). Convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or use ByteTokenizer, which takes "
                      "any bytes.");
    }
    fn(static_cast<char32_t>(cp));
  }
}

}  // namespace

CharTokenizer CharTokenizer::from_text(std::string_view text) {
  std::set<char32_t> seen;
  for_each_code_point(text, "the text", [&](char32_t cp) { seen.insert(cp); });
  return CharTokenizer(std::vector<char32_t>(seen.begin(), seen.end()));
}

CharTokenizer CharTokenizer::from_file(const std::string& path) {
  const std::string text = detail::read_file(path, "corpus");
  if (text.empty()) {
    throw DataError("CharTokenizer: the corpus '" + path + "' is empty; its characters make the vocabulary.");
  }
  std::set<char32_t> seen;
  for_each_code_point(text, "the corpus '" + path + "'", [&](char32_t cp) { seen.insert(cp); });
  return CharTokenizer(std::vector<char32_t>(seen.begin(), seen.end()));
}

CharTokenizer CharTokenizer::load(const std::string& path) {
  const std::string bytes = detail::read_file(path, "character vocabulary");
  if (bytes.compare(0, kMagic.size(), kMagic) != 0) {
    throw DataError("CharTokenizer::load: '" + path +
                    "' is not a vocabulary written by CharTokenizer::save (it does not start with \"" +
                    std::string(kMagic.substr(0, kMagic.size() - 1)) + "\").");
  }
  std::vector<char32_t> characters;
  for_each_code_point(std::string_view(bytes).substr(kMagic.size()), "the vocabulary '" + path + "'",
                      [&](char32_t cp) { characters.push_back(cp); });
  return CharTokenizer(std::move(characters));
}

CharTokenizer::CharTokenizer(std::vector<char32_t> characters) : characters_(std::move(characters)) {
  if (characters_.empty()) throw ConfigError("CharTokenizer needs at least one character, got none.");
  for (size_t i = 0; i < characters_.size(); ++i) {
    if (characters_[i] > 0x10FFFF || (characters_[i] >= 0xD800 && characters_[i] <= 0xDFFF)) {
      throw ConfigError("CharTokenizer: character " + std::to_string(i) + " (U+" +
                        detail::hex64(characters_[i]).substr(8) + ") is not a Unicode scalar value.");
    }
    if (i > 0 && characters_[i] <= characters_[i - 1]) {
      throw ConfigError("CharTokenizer: the characters must be sorted by code point without repeats; character " +
                        std::to_string(i) + " (U+" + detail::hex64(characters_[i]).substr(8) + ") does not follow U+" +
                        detail::hex64(characters_[i - 1]).substr(8) + ".");
    }
  }
  ascii_.fill(-1);
  for (size_t i = 0; i < characters_.size(); ++i) {
    if (characters_[i] < 128) {
      ascii_[characters_[i]] = static_cast<int64_t>(i);
    } else {
      others_.emplace(characters_[i], static_cast<int64_t>(i));
    }
  }
}

void CharTokenizer::save(const std::string& path) const {
  std::string bytes(kMagic);
  for (char32_t cp : characters_) detail::append_utf8(cp, &bytes);
  detail::AtomicFile file(path, "character vocabulary");
  file.write(bytes.data(), bytes.size());
  file.commit();
}

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  const auto unk = static_cast<int64_t>(characters_.size());
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for_each_code_point(text, "the text", [&](char32_t cp) {
    if (cp < 128) {
      const int64_t id = ascii_[cp];
      ids.push_back(id >= 0 ? id : unk);
    } else {
      auto it = others_.find(cp);
      ids.push_back(it != others_.end() ? it->second : unk);
    }
  });
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  const auto k = static_cast<int64_t>(characters_.size());
  std::string text;
  text.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id >= 0 && id < k) {
      detail::append_utf8(characters_[id], &text);
    } else if (id == k) {
      detail::append_utf8(U'\uFFFD', &text);  // unk: the replacement character, as decoders show lost text
    } else if (id < 0 || id >= vocab_size()) {
      throw DataError("CharTokenizer::decode: id " + std::to_string(id) + " at position " + std::to_string(i) +
                      " is outside the vocabulary (0.." + std::to_string(vocab_size() - 1) + ": " + std::to_string(k) +
                      " characters, then unk, bos, eos, pad).");
    }
  }
  return text;
}

SpecialIds CharTokenizer::special_ids() const {
  const auto k = static_cast<int64_t>(characters_.size());
  return {k, k + 1, k + 2, k + 3};
}

std::string CharTokenizer::fingerprint() const {
  std::string bytes;
  for (char32_t cp : characters_) detail::append_utf8(cp, &bytes);
  return "volt-char-tokenizer-1:" + std::to_string(characters_.size()) + ":" + detail::hex64(detail::fnv1a64(bytes));
}

}  // namespace volt::data
