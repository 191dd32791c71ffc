#pragma once
#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "volt/data/text/tokenizer.h"

namespace volt::data {

/// Character tokens built from a corpus: the distinct Unicode code points of its UTF-8 text, sorted
/// by code point, get ids 0..K-1; then unk K (any character the corpus did not have), bos K+1,
/// eos K+2, pad K+3. Text that is not valid UTF-8 is a DataError naming the byte offset.
class CharTokenizer : public Tokenizer {
 public:
  /// The vocabulary of `text`.
  static CharTokenizer from_text(std::string_view text);
  /// The vocabulary of the file at `path` (DataError naming the file when it is missing, unreadable,
  /// empty or not UTF-8).
  static CharTokenizer from_file(const std::string& path);
  /// A vocabulary saved by save().
  static CharTokenizer load(const std::string& path);
  /// The characters, sorted by code point; a character's id is its position.
  explicit CharTokenizer(std::vector<char32_t> characters);

  /// Writes the vocabulary to `path` (a temporary file, fsynced, renamed).
  void save(const std::string& path) const;

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(characters_.size()) + 4; }
  SpecialIds special_ids() const override;
  std::string fingerprint() const override;
  const std::vector<char32_t>& characters() const { return characters_; }

 private:
  std::vector<char32_t> characters_;
  std::array<int64_t, 128> ascii_{};
  std::unordered_map<char32_t, int64_t> others_;
};

}  // namespace volt::data
