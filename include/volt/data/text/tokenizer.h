#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace volt::data {

/// The ids a tokenizer reserves for special tokens; -1 where it has none.
struct SpecialIds {
  int64_t unk = -1;  ///< stands for text the vocabulary cannot spell
  int64_t bos = -1;  ///< beginning of a sequence
  int64_t eos = -1;  ///< end of a sequence
  int64_t pad = -1;  ///< fills sequences up to a common length
};

/// Turns text into token ids and back. Implementations are immutable after construction, so one
/// tokenizer may be shared by the loader's worker threads.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// The ids of `text` (UTF-8), without special tokens: add bos/eos yourself where a model wants
  /// them. Every id is in [0, vocab_size()).
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  /// The text of `ids`; special ids (bos, eos, pad) produce no text. An id outside
  /// [0, vocab_size()) is a DataError naming it and its position.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual SpecialIds special_ids() const = 0;
  /// Identifies the tokenizer and its vocabulary: two tokenizers with the same fingerprint give the
  /// same ids for any text. Token files store it to notice a changed tokenizer.
  virtual std::string fingerprint() const = 0;
};

}  // namespace volt::data
