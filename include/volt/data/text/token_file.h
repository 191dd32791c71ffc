#pragma once
#include <cstdint>
#include <string>

#include "volt/data/text/tokenizer.h"

namespace volt::data {

/// How token ids are stored: 2 or 4 bytes each (little-endian). kAuto: uint16 when the vocabulary
/// has at most 65536 ids, else uint32.
enum class TokenDtype { kAuto, kUInt16, kUInt32 };

struct TokenFileOptions {
  TokenDtype dtype = TokenDtype::kAuto;
  /// After each line's tokens, the tokenizer's eos id (ConfigError when it has none).
  bool append_eos = false;
  /// Threads that encode blocks of lines in parallel; the file is the same for any count.
  int num_threads = 1;
};

/// What write_token_file wrote, as the token file's header records it.
struct TokenFileInfo {
  int64_t tokens = 0;
  int64_t vocab_size = 0;
  /// 2 (uint16) or 4 (uint32).
  int token_bytes = 0;
  /// FNV-1a 64 of the tokenizer's fingerprint() and of the corpus bytes.
  uint64_t tokenizer_hash = 0;
  uint64_t corpus_hash = 0;
  uint64_t corpus_bytes = 0;
  bool append_eos = false;
};

/// Tokenizes the UTF-8 text file `corpus` into `token_file`: each line, with its line break, is
/// encoded by `tokenizer` (so a byte or character tokenizer keeps the line breaks, SentencePiece
/// treats them as whitespace), the ids are appended in order. The file is a 64-byte header (magic
/// "VOLTTOK1", token bytes, count, vocabulary size, the hashes above) followed by the ids; it is
/// written to a temporary file, fsynced and renamed, so a token file is complete or absent.
/// DataError naming the corpus when it is missing, empty or not readable; ConfigError when the
/// vocabulary does not fit the dtype.
TokenFileInfo write_token_file(const std::string& corpus, const Tokenizer& tokenizer, const std::string& token_file,
                               const TokenFileOptions& options = {});

/// The hash write_token_file stores for `tokenizer` (FNV-1a 64 of its fingerprint()).
uint64_t tokenizer_hash(const Tokenizer& tokenizer);

/// The hash write_token_file stores for the corpus file (FNV-1a 64 of its bytes).
uint64_t corpus_hash(const std::string& corpus);

/// A token file written by write_token_file, memory-mapped read-only (shared between threads and
/// processes by the page cache). The constructor checks the header and that the file size is
/// exactly header + count * token bytes; any mismatch is a DataError naming the file, the sizes
/// and how to fix it.
class TokenFile {
 public:
  explicit TokenFile(std::string path);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t size() const { return info_.tokens; }
  const TokenFileInfo& info() const { return info_; }
  const std::string& path() const { return path_; }
  /// Token i (no bounds check).
  int64_t operator[](int64_t i) const {
    return info_.token_bytes == 2 ? static_cast<const uint16_t*>(data_)[i] : static_cast<const uint32_t*>(data_)[i];
  }
  /// Tokens [start, start + count) into out (DataError when the range leaves the file).
  void copy(int64_t start, int64_t count, int64_t* out) const;

 private:
  std::string path_;
  TokenFileInfo info_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* data_ = nullptr;
};

}  // namespace volt::data
