#pragma once
#include "volt/data/text/tokenizer.h"

namespace volt::data {

/// Byte-level tokens: id b (0..255) is the byte b of the UTF-8 text, so every text is encoded
/// without an unknown token and decode(encode(t)) == t. Specials follow the bytes: bos 256,
/// eos 257, pad 258 (vocab_size 259); there is no unk.
class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int64_t kBos = 256;
  static constexpr int64_t kEos = 257;
  static constexpr int64_t kPad = 258;

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return 259; }
  SpecialIds special_ids() const override { return {-1, kBos, kEos, kPad}; }
  std::string fingerprint() const override { return "volt-byte-tokenizer-1"; }
};

}  // namespace volt::data
