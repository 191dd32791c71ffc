#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "volt/data/dataset.h"
#include "volt/data/text/token_file.h"
#include "volt/data/text/tokenizer.h"

namespace volt::data {

struct TokenWindowOptions {
  /// Tokens per example (the model's context length).
  int64_t context = 128;
  /// Tokens between the starts of consecutive windows; 0: context (windows that do not overlap).
  int64_t stride = 0;
  /// How from_corpus writes the token file.
  TokenFileOptions token_file;
};

/// A language-model data set: fixed-length windows over a memory-mapped token file. Example i is
/// {input int64 [context], target int64 [context]}: tokens [i*stride, i*stride + context) and the
/// same shifted by one (the next token at every position). There are
/// (tokens - context - 1) / stride + 1 windows; a token file shorter than one window (context + 1
/// tokens) is a DataError saying how many tokens it has and how many are needed.
class TokenWindowDataset : public Dataset {
 public:
  /// Maps an existing token file (see TokenFile for its checks).
  explicit TokenWindowDataset(const std::string& token_file, int64_t context, int64_t stride = 0);

  /// Tokenizes `corpus` into `token_file` once: an existing token file is reused when its header
  /// records the same tokenizer (fingerprint), corpus (hash and size) and options, and is written
  /// again (atomically) otherwise. A token file that is damaged (wrong size or header) is a
  /// DataError, not silently replaced: delete it to write it again.
  static std::shared_ptr<TokenWindowDataset> from_corpus(const std::string& corpus, const Tokenizer& tokenizer,
                                                         const std::string& token_file,
                                                         const TokenWindowOptions& options = {});

  int64_t size() const override { return windows_; }
  Batch get(int64_t index) const override;
  /// {input [B, context], target [B, context]}, filled straight from the mapped file.
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  int64_t context() const { return context_; }
  int64_t stride() const { return stride_; }
  const TokenFile& tokens() const { return *file_; }
  /// Whether from_corpus wrote the token file (false: it reused the one there).
  bool tokenized() const { return tokenized_; }

 private:
  std::shared_ptr<const TokenFile> file_;
  int64_t context_ = 0;
  int64_t stride_ = 0;
  int64_t windows_ = 0;
  bool tokenized_ = false;
};

}  // namespace volt::data
