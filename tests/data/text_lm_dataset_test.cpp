#include <ATen/ops/equal.h>
#include <ATen/ops/stack.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "data/text_reference.h"
#include "support/temp_dir.h"
#include "volt/core/error.h"
#include "volt/data/dataloader.h"
#include "volt/data/text/byte_tokenizer.h"
#include "volt/data/text/char_tokenizer.h"
#include "volt/data/text/sentencepiece_tokenizer.h"
#include "volt/data/text/token_file.h"
#include "volt/data/text/token_window_dataset.h"

namespace {

namespace fs = std::filesystem;
using volt::data::ByteTokenizer;
using volt::data::TokenDtype;
using volt::data::TokenFile;
using volt::data::TokenWindowDataset;
using volt::data::TokenWindowOptions;
using volt::testing::TempDir;

void write_text(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const volt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<int64_t> lm_ids_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

TEST(TokenWindowDataset, WindowsAreShiftedTokenRunsAtTheStride) {
  TempDir dir;
  const std::string text = "abcdefghij\nklmnopqrstuvwxyz\n0123";  // 32 bytes, 32 byte tokens
  write_text(dir / "c.txt", text);
  ByteTokenizer bytes;
  for (const auto& [context, stride] : std::vector<std::pair<int64_t, int64_t>>{{8, 0}, {8, 3}, {31, 1}, {5, 40}}) {
    SCOPED_TRACE("context " + std::to_string(context) + " stride " + std::to_string(stride));
    TokenWindowOptions o;
    o.context = context;
    o.stride = stride;
    auto ds = TokenWindowDataset::from_corpus(dir / "c.txt", bytes, dir / "c.tok", o);
    const int64_t step = stride == 0 ? context : stride;
    EXPECT_EQ(ds->size(), (32 - context - 1) / step + 1);
    std::vector<int64_t> all;
    for (int64_t i = 0; i < ds->size(); ++i) {
      const volt::Batch ex = ds->get(i);
      ASSERT_EQ(ex.size(), 2u);
      EXPECT_EQ(ex[0].scalar_type(), at::kLong);
      EXPECT_EQ(ex[0].sizes(), (std::vector<int64_t>{context}));
      const std::string expect_in = text.substr(i * step, context);
      const std::string expect_target = text.substr(i * step + 1, context);
      EXPECT_EQ(bytes.decode(lm_ids_of(ex[0])), expect_in) << i;
      EXPECT_EQ(bytes.decode(lm_ids_of(ex[1])), expect_target) << i;
      all.push_back(i);
    }
    // A batch is the examples stacked.
    const volt::Batch batch = ds->get_batch(all);
    std::vector<at::Tensor> inputs, targets;
    for (int64_t i : all) inputs.push_back(ds->get(i)[0]), targets.push_back(ds->get(i)[1]);
    EXPECT_TRUE(at::equal(batch[0], at::stack(inputs)));
    EXPECT_TRUE(at::equal(batch[1], at::stack(targets)));
    EXPECT_THROW(ds->get(ds->size()), volt::Error);
    EXPECT_THROW(ds->get_batch({-1}), volt::Error);
  }
}

TEST(TokenWindowDataset, TokenFileIsWrittenOnceAndAgainOnlyWhenCorpusOrTokenizerChange) {
  TempDir dir;
  write_text(dir / "c.txt", "hello world\nhello again\n");
  ByteTokenizer bytes;
  TokenWindowOptions o;
  o.context = 4;
  auto first = TokenWindowDataset::from_corpus(dir / "c.txt", bytes, dir / "c.tok", o);
  EXPECT_TRUE(first->tokenized());
  EXPECT_EQ(first->tokens().info().token_bytes, 2);
  EXPECT_EQ(first->tokens().size(), 24);
  EXPECT_EQ(fs::file_size(dir / "c.tok"), 64u + 2 * 24);
  const auto written = fs::last_write_time(dir / "c.tok");
  auto again = TokenWindowDataset::from_corpus(dir / "c.txt", bytes, dir / "c.tok", o);
  EXPECT_FALSE(again->tokenized());
  EXPECT_EQ(fs::last_write_time(dir / "c.tok"), written);

  // Same size, other bytes: the corpus hash notices.
  write_text(dir / "c.txt", "HELLO world\nhello again\n");
  auto changed = TokenWindowDataset::from_corpus(dir / "c.txt", bytes, dir / "c.tok", o);
  EXPECT_TRUE(changed->tokenized());
  EXPECT_EQ(bytes.decode(lm_ids_of(changed->get(0)[0])), "HELL");
  // Another tokenizer: written again, with its ids.
  const auto chars = volt::data::CharTokenizer::from_file(dir / "c.txt");
  auto by_char = TokenWindowDataset::from_corpus(dir / "c.txt", chars, dir / "c.tok", o);
  EXPECT_TRUE(by_char->tokenized());
  EXPECT_EQ(chars.decode(lm_ids_of(by_char->get(0)[0])), "HELL");
  // uint32 on request, eos after every line.
  o.token_file.dtype = TokenDtype::kUInt32;
  o.token_file.append_eos = true;
  auto wide = TokenWindowDataset::from_corpus(dir / "c.txt", bytes, dir / "c.tok", o);
  EXPECT_TRUE(wide->tokenized());
  EXPECT_EQ(wide->tokens().info().token_bytes, 4);
  EXPECT_EQ(wide->tokens().size(), 26);
  EXPECT_EQ(wide->tokens()[11], '\n');
  EXPECT_EQ(wide->tokens()[12], ByteTokenizer::kEos);
  EXPECT_EQ(fs::file_size(dir / "c.tok"), 64u + 4 * 26);
  // The same file for any thread count.
  std::string one, many;
  for (int threads : {1, 3}) {
    volt::data::TokenFileOptions t;
    t.num_threads = threads;
    write_text(dir / "big.txt", std::string(5000, 'x') + "\n" + read(dir / "c.txt") + "tail without newline");
    volt::data::write_token_file(dir / "big.txt", chars, dir / ("big" + std::to_string(threads) + ".tok"), t);
  }
  EXPECT_EQ(read(dir / "big1.tok"), read(dir / "big3.tok"));
  // More threads than lines or bytes: nothing lost, nothing doubled.
  for (const std::string tiny : {"x", "a\nb\nc", "\n\n\n"}) {
    write_text(dir / "tiny.txt", tiny);
    volt::data::TokenFileOptions t;
    t.num_threads = 8;
    EXPECT_EQ(volt::data::write_token_file(dir / "tiny.txt", bytes, dir / "tiny.tok", t).tokens,
              static_cast<int64_t>(tiny.size()));
    EXPECT_EQ(read(dir / "tiny.tok").substr(64).size(), 2 * tiny.size());
  }
  // Nothing but the token files and corpora: no temporary file left.
  for (const auto& entry : fs::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
}

TEST(TokenWindowDataset, RefusesShortCorpusMissingFilesAndTokenFilesOfTheWrongSize) {
  TempDir dir;
  ByteTokenizer bytes;
  write_text(dir / "short.txt", "abcd");
  TokenWindowOptions o;
  o.context = 4;
  std::string e = error_of([&] { TokenWindowDataset::from_corpus(dir / "short.txt", bytes, dir / "s.tok", o); });
  EXPECT_NE(e.find("holds 4 tokens, fewer than one window needs (context 4 + 1 for the next-token target = 5)"),
            std::string::npos)
      << e;
  e = error_of([&] { TokenWindowDataset::from_corpus(dir / "absent.txt", bytes, dir / "a.tok", o); });
  EXPECT_NE(e.find("the corpus '" + (dir / "absent.txt") + "' does not exist"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir / "a.tok"));
  write_text(dir / "empty.txt", "");
  e = error_of([&] { TokenWindowDataset::from_corpus(dir / "empty.txt", bytes, dir / "e.tok", o); });
  EXPECT_NE(e.find("empty.txt' is empty"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir / "e.tok"));
  e = error_of([&] { TokenWindowDataset t(dir / "absent.tok", 4); });
  EXPECT_NE(e.find("the token file '" + (dir / "absent.tok") + "' does not exist"), std::string::npos) << e;
  o.context = 0;
  EXPECT_NE(error_of([&] {
              TokenWindowDataset::from_corpus(dir / "short.txt", bytes, dir / "s.tok", o);
            }).find("context must be at least 1"),
            std::string::npos);

  // A good file, then damaged copies of it.
  write_text(dir / "c.txt", std::string(100, 'a'));
  volt::data::write_token_file(dir / "c.txt", bytes, dir / "good.tok");
  const std::string good = read(dir / "good.tok");
  ASSERT_EQ(good.size(), 64u + 200u);
  write_text(dir / "cut.tok", good.substr(0, good.size() - 1));
  e = error_of([&] { TokenWindowDataset t(dir / "cut.tok", 4); });
  EXPECT_NE(e.find("cut.tok' has the wrong size: 263 bytes, but its header announces 100 tokens of 2 bytes (64 + 100 "
                   "x 2 = 264 bytes)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("Delete it"), std::string::npos) << e;
  write_text(dir / "long.tok", good + "xx");
  EXPECT_NE(error_of([&] { TokenWindowDataset t(dir / "long.tok", 4); }).find("has the wrong size: 266 bytes"),
            std::string::npos);
  write_text(dir / "tiny.tok", good.substr(0, 10));
  EXPECT_NE(error_of([&] { TokenWindowDataset t(dir / "tiny.tok", 4); }).find("fewer than the 64-byte header"),
            std::string::npos);
  write_text(dir / "other.tok", "NOTATOKN" + good.substr(8));
  EXPECT_NE(error_of([&] { TokenWindowDataset t(dir / "other.tok", 4); }).find("is not a token file"),
            std::string::npos);
  // from_corpus does not replace a damaged token file silently.
  o.context = 4;
  e = error_of([&] { TokenWindowDataset::from_corpus(dir / "c.txt", bytes, dir / "cut.tok", o); });
  EXPECT_NE(e.find("has the wrong size"), std::string::npos) << e;
}

TEST(TokenWindowDataset, LoaderWorkersShareTheMappedFileAndGiveTheSameBatches) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "line " + std::to_string(i * 7919 % 1000) + " of the corpus\n";
  write_text(dir / "c.txt", text);
  TokenWindowOptions o;
  o.context = 16;
  o.stride = 5;
  const auto ds = TokenWindowDataset::from_corpus(dir / "c.txt", ByteTokenizer(), dir / "c.tok", o);
  std::vector<std::vector<at::Tensor>> passes;
  for (int64_t workers : {0, 2, 3}) {
    volt::data::DataLoaderOptions lo;
    lo.batch_size = 7;
    lo.shuffle = true;
    lo.seed = 5;
    lo.num_workers = workers;
    volt::data::DataLoader loader(ds, lo);
    auto stream = loader.stream();
    std::vector<at::Tensor> pass;
    while (auto batch = stream->next()) {
      ASSERT_EQ(batch->size(), 2u);
      // Every target row is its input row shifted by one token of the corpus.
      EXPECT_TRUE(at::equal((*batch)[0].narrow(1, 1, 15), (*batch)[1].narrow(1, 0, 15)));
      pass.push_back((*batch)[0]);
      pass.push_back((*batch)[1]);
    }
    EXPECT_EQ(static_cast<int64_t>(pass.size()), 2 * loader.num_batches());
    passes.push_back(std::move(pass));
  }
  for (size_t w = 1; w < passes.size(); ++w) {
    ASSERT_EQ(passes[w].size(), passes[0].size());
    for (size_t i = 0; i < passes[0].size(); ++i) EXPECT_TRUE(at::equal(passes[w][i], passes[0][i])) << w << " " << i;
  }
}

// A vocabulary larger than uint16 holds.
class WideTokenizer : public volt::data::Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int64_t> ids;
    for (char c : text) ids.push_back(70000 + static_cast<unsigned char>(c));
    return ids;
  }
  std::string decode(const std::vector<int64_t>&) const override { return ""; }
  int64_t vocab_size() const override { return 70256; }
  volt::data::SpecialIds special_ids() const override { return {}; }
  std::string fingerprint() const override { return "wide"; }
};

TEST(TokenWindowDataset, LargeVocabulariesGetUint32TokensAndUint16IsRefusedForThem) {
  TempDir dir;
  write_text(dir / "c.txt", "0123456789");
  WideTokenizer wide;
  TokenWindowOptions o;
  o.context = 3;
  auto ds = TokenWindowDataset::from_corpus(dir / "c.txt", wide, dir / "c.tok", o);
  EXPECT_EQ(ds->tokens().info().token_bytes, 4);
  EXPECT_EQ(lm_ids_of(ds->get(1)[0]), (std::vector<int64_t>{70000 + '3', 70000 + '4', 70000 + '5'}));
  volt::data::TokenFileOptions narrow;
  narrow.dtype = TokenDtype::kUInt16;
  const std::string e = error_of([&] { volt::data::write_token_file(dir / "c.txt", wide, dir / "n.tok", narrow); });
  EXPECT_NE(e.find("a vocabulary of 70256 ids does not fit in uint16 tokens"), std::string::npos) << e;
  narrow.append_eos = true;
  narrow.dtype = TokenDtype::kAuto;
  EXPECT_NE(
      error_of([&] { volt::data::write_token_file(dir / "c.txt", wide, dir / "n.tok", narrow); }).find("has no eos id"),
      std::string::npos);
}

// The King James Bible as Debian's bible-kjv prints it from bible-kjv-text's /usr/lib/bible.data (a compressed
// format, not plain text): written to `path`, or why not.
std::string write_kjv(const std::string& path) {
  if (!fs::exists("/usr/bin/bible") || !fs::exists("/usr/lib/bible.data")) {
    return "the King James Bible is not installed (apt-get install bible-kjv bible-kjv-text)";
  }
  const std::string cmd = "/usr/bin/bible gen1:1-rev22:21 > " + volt::testing::shell_quote(path);
  if (std::system(cmd.c_str()) != 0 || fs::file_size(path) < 4000000) return "`" + cmd + "` failed";
  return "";
}

TEST(TokenWindowDataset, KingJamesBibleThroughSentencePieceHasPythonsTokenIds) {
  if (!volt::data::SentencePieceTokenizer::available()) GTEST_SKIP() << "no SentencePiece module in this build";
  TempDir dir;
  if (const std::string why = write_kjv(dir / "kjv.txt"); !why.empty()) GTEST_SKIP() << why;
  volt::data::SentencePieceTrainOptions t;
  t.input = dir / "kjv.txt";
  t.model_file = dir / "kjv.model";
  t.vocab_size = 2000;
  t.model_type = "bpe";
  t.input_sentence_size = 20000;
  t.num_threads = 2;
  const auto sp = volt::data::SentencePieceTokenizer::train(t);
  TokenWindowOptions o;
  o.context = 256;
  o.stride = 128;
  o.token_file.num_threads = 2;
  auto ds = TokenWindowDataset::from_corpus(dir / "kjv.txt", sp, dir / "kjv.tok", o);
  const TokenFile& tokens = ds->tokens();
  std::cout << "King James Bible: " << fs::file_size(dir / "kjv.txt") << " bytes, " << tokens.size() << " tokens, "
            << ds->size() << " windows\n";
  EXPECT_GT(tokens.size(), 900000);
  EXPECT_EQ(ds->size(), (tokens.size() - 257) / 128 + 1);
  EXPECT_EQ(sp.decode(lm_ids_of(ds->get(0)[0])).rfind("Genesis 1 1 In the beginning God created the heaven", 0), 0u)
      << sp.decode(lm_ids_of(ds->get(0)[0]));
  if (const std::string why = volt::testing::python_module_missing("sentencepiece", "python3-sentencepiece");
      !why.empty()) {
    GTEST_SKIP() << "the comparison with Python: " << why;
  }
  const nlohmann::json ref = volt::testing::run_text_reference(
      "spm-corpus " + volt::testing::shell_quote(t.model_file) + " " + volt::testing::shell_quote(dir / "kjv.txt") +
      " " + volt::testing::shell_quote(dir / "python.u16"));
  ASSERT_EQ(ref["tokens"].get<int64_t>(), tokens.size());
  const std::string python = read(dir / "python.u16");
  const std::string ours = read(dir / "kjv.tok");
  ASSERT_EQ(ours.size(), 64 + python.size());
  EXPECT_TRUE(ours.compare(64, std::string::npos, python) == 0) << "the token ids differ from Python's";
}

}  // namespace
