#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "volt/data/text/tokenizer.h"

namespace volt::data {

/// What SentencePieceTokenizer::train learns from, and how (SentencePiece's trainer flags of the
/// same names).
struct SentencePieceTrainOptions {
  /// A UTF-8 text file, one sentence per line.
  std::string input;
  /// Where the model goes (e.g. "corpus.model"): written to a temporary file, fsynced, renamed.
  std::string model_file;
  int64_t vocab_size = 8000;
  /// "unigram" (SentencePiece's default), "bpe", "char" or "word".
  std::string model_type = "unigram";
  /// The share of characters the vocabulary must cover (SentencePiece's default 0.9995; 1.0 for
  /// small alphabets).
  double character_coverage = 0.9995;
  /// Sentences sampled for training; 0: every line.
  int64_t input_sentence_size = 0;
  /// Lines longer than this many bytes are left out of training (SentencePiece's default 4192).
  int64_t max_sentence_length = 4192;
  /// Unknown characters become their UTF-8 bytes (ids <0x00> .. <0xFF>) instead of unk.
  bool byte_fallback = false;
  int num_threads = 1;
  /// Special ids (-1: none); SentencePiece's defaults.
  int64_t unk_id = 0;
  int64_t bos_id = 1;
  int64_t eos_id = 2;
  int64_t pad_id = -1;
  /// SentencePiece prints its training log to stderr when true.
  bool verbose = false;
};

/// SentencePiece (Debian's libsentencepiece) as a Tokenizer: a model trained by train() or by
/// SentencePiece's own tools (spm_train, Python's sentencepiece) is loaded from its .model file;
/// encode and decode are SentencePiece's, so the ids equal Python's `sp.encode(text)`.
///
/// SentencePiece runs in a module of its own, libvolt_sentencepiece.so beside libvolt.so (or the
/// file VOLT_SENTENCEPIECE_MODULE names), opened on first use: Debian's libsentencepiece carries a
/// protobuf that clashes with LibTorch's when linked into one program. Where the module is absent
/// (Volt built without libsentencepiece-dev) the constructor and train() throw NotSupportedError
/// saying which package to install, and available() is false.
class SentencePieceTokenizer : public Tokenizer {
 public:
  /// Loads a .model file (DataError naming it when missing or not a SentencePiece model).
  explicit SentencePieceTokenizer(const std::string& model_file);
  /// Trains a model from options.input, writes it to options.model_file and returns it loaded.
  /// ConfigError for options SentencePiece would refuse (naming the option), DataError for a
  /// missing or empty input, or SentencePiece's own refusal with its message.
  static SentencePieceTokenizer train(const SentencePieceTrainOptions& options);
  /// Whether this build has SentencePiece.
  static bool available();

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override;
  SpecialIds special_ids() const override;
  std::string fingerprint() const override;
  /// The text of one piece (e.g. "▁the").
  std::string id_to_piece(int64_t id) const;
  const std::string& model_file() const { return model_file_; }

 private:
  struct Impl;
  SentencePieceTokenizer(std::string model_file, std::shared_ptr<const Impl> impl);
  static std::shared_ptr<const Impl> load_model(const std::string& model_file, const std::string& bytes);
  std::string model_file_;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace volt::data
