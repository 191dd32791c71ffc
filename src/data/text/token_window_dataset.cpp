#include "volt/data/text/token_window_dataset.h"

#include <ATen/ops/empty.h>

#include <filesystem>
#include <string>

#include "volt/core/error.h"

namespace volt::data {
namespace {

void check_window(int64_t context, int64_t stride) {
  if (context < 1) {
    throw ConfigError("TokenWindowDataset: context must be at least 1 token, got " + std::to_string(context) + ".");
  }
  if (stride < 0) {
    throw ConfigError("TokenWindowDataset: stride must be at least 1 (or 0 for stride = context), got " +
                      std::to_string(stride) + ".");
  }
}

}  // namespace

TokenWindowDataset::TokenWindowDataset(const std::string& token_file, int64_t context, int64_t stride)
    : context_(context), stride_(stride == 0 ? context : stride) {
  check_window(context, stride);
  file_ = std::make_shared<const TokenFile>(token_file);
  const int64_t n = file_->size();
  if (n < context_ + 1) {
    throw DataError("TokenWindowDataset: '" + token_file + "' holds " + std::to_string(n) +
                    " tokens, fewer than one window needs (context " + std::to_string(context_) +
                    " + 1 for the next-token target = " + std::to_string(context_ + 1) +
                    "). Use a longer corpus or a smaller context.");
  }
  windows_ = (n - context_ - 1) / stride_ + 1;
}

std::shared_ptr<TokenWindowDataset> TokenWindowDataset::from_corpus(const std::string& corpus,
                                                                    const Tokenizer& tokenizer,
                                                                    const std::string& token_file,
                                                                    const TokenWindowOptions& options) {
  check_window(options.context, options.stride);
  std::error_code ec;
  bool write = !std::filesystem::exists(token_file, ec);
  if (!write) {
    // A damaged file throws here (the caller deletes it); a valid one for other input is replaced.
    const TokenFile existing(token_file);
    const TokenFileInfo& info = existing.info();
    bool same = info.tokenizer_hash == tokenizer_hash(tokenizer) && info.vocab_size == tokenizer.vocab_size() &&
                info.append_eos == options.token_file.append_eos &&
                (options.token_file.dtype == TokenDtype::kAuto ||
                 info.token_bytes == (options.token_file.dtype == TokenDtype::kUInt16 ? 2 : 4));
    if (same) {
      // The corpus as it is now: size first (cheap), then the hash of its bytes.
      const auto bytes = std::filesystem::file_size(corpus, ec);
      same = !ec && bytes == info.corpus_bytes;
      if (same) same = corpus_hash(corpus) == info.corpus_hash;
    }
    write = !same;
  }
  if (write) write_token_file(corpus, tokenizer, token_file, options.token_file);
  auto dataset = std::make_shared<TokenWindowDataset>(token_file, options.context, options.stride);
  dataset->tokenized_ = write;
  return dataset;
}

Batch TokenWindowDataset::get(int64_t index) const {
  if (index < 0 || index >= windows_) {
    throw Error("TokenWindowDataset::get: index " + std::to_string(index) + " is out of range for " +
                std::to_string(windows_) + " windows. Valid indices are 0.." + std::to_string(windows_ - 1) + ".");
  }
  at::Tensor window = at::empty({context_ + 1}, at::kLong);
  file_->copy(index * stride_, context_ + 1, window.data_ptr<int64_t>());
  return {window.narrow(0, 0, context_), window.narrow(0, 1, context_)};
}

Batch TokenWindowDataset::get_batch(const std::vector<int64_t>& indices) const {
  const auto b = static_cast<int64_t>(indices.size());
  at::Tensor input = at::empty({b, context_}, at::kLong);
  at::Tensor target = at::empty({b, context_}, at::kLong);
  int64_t* in = input.data_ptr<int64_t>();
  int64_t* tg = target.data_ptr<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t index = indices[r];
    if (index < 0 || index >= windows_) {
      throw Error("TokenWindowDataset::get_batch: index " + std::to_string(index) + " is out of range for " +
                  std::to_string(windows_) + " windows. Valid indices are 0.." + std::to_string(windows_ - 1) + ".");
    }
    const int64_t start = index * stride_;
    file_->copy(start, context_, in + r * context_);
    file_->copy(start + 1, context_, tg + r * context_);
  }
  return {input, target};
}

}  // namespace volt::data
