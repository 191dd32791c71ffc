#include "volt/data/text/byte_tokenizer.h"

#include <string>

#include "volt/core/error.h"

namespace volt::data {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id >= 0 && id < 256) {
      text.push_back(static_cast<char>(id));
    } else if (id < 0 || id >= vocab_size()) {
      throw DataError("ByteTokenizer::decode: id " + std::to_string(id) + " at position " + std::to_string(i) +
                      " is outside the vocabulary (0..258: bytes 0..255, bos 256, eos 257, pad 258).");
    }
  }
  return text;
}

}  // namespace volt::data
