#include "volt/data/text/sentencepiece_tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/text/detail/text_files.h"
#include "volt/core/error.h"

#include <dlfcn.h>

#include <mutex>

#include "data/text/detail/sentencepiece_api.h"

namespace volt::data {

namespace {

using detail::SentencePieceApi;

// The module beside libvolt.so (or VOLT_SENTENCEPIECE_MODULE), opened once.
const SentencePieceApi* sentencepiece_api(std::string* why) {
  static std::once_flag once;
  static const SentencePieceApi* api = nullptr;
  static std::string error;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("VOLT_SENTENCEPIECE_MODULE"); env != nullptr && *env != '\0') {
      candidates.emplace_back(env);
    } else {
      Dl_info info{};
      if (::dladdr(reinterpret_cast<void*>(&sentencepiece_api), &info) != 0 && info.dli_fname != nullptr) {
        candidates.push_back(
            (std::filesystem::path(info.dli_fname).parent_path() / "libvolt_sentencepiece.so").string());
      }
      candidates.emplace_back("libvolt_sentencepiece.so");
    }
    std::string tried;
    for (const auto& path : candidates) {
      void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle == nullptr) {
        const char* e = ::dlerror();
        tried += "\n  " + path + ": " + (e != nullptr ? e : "cannot be opened");
        continue;
      }
      using Entry = const SentencePieceApi* (*)();
      auto entry = reinterpret_cast<Entry>(::dlsym(handle, "volt_sentencepiece_api"));
      const SentencePieceApi* table = entry != nullptr ? entry() : nullptr;
      if (table == nullptr || table->version != SentencePieceApi::kVersion) {
        tried += "\n  " + path + ": not Volt's SentencePiece module of this version";
        ::dlclose(handle);
        continue;
      }
      api = table;  // kept open for the life of the process
      return;
    }
    error =
        "SentencePiece is not available: Volt's SentencePiece module (libvolt_sentencepiece.so, built when "
        "Debian's libsentencepiece-dev is installed) could not be loaded. Tried:" +
        tried +
        "\nInstall libsentencepiece-dev (apt-get install libsentencepiece-dev), configure and build Volt again, "
        "or point VOLT_SENTENCEPIECE_MODULE at the module.";
  });
  if (api == nullptr && why != nullptr) *why = error;
  return api;
}

const SentencePieceApi& require_api() {
  std::string why;
  const SentencePieceApi* api = sentencepiece_api(&why);
  if (api == nullptr) throw NotSupportedError(why);
  return *api;
}

}  // namespace

struct SentencePieceTokenizer::Impl {
  const SentencePieceApi* api = nullptr;
  void* processor = nullptr;
  std::string fingerprint;
  ~Impl() {
    if (processor != nullptr) api->destroy(processor);
  }
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_file)
    : SentencePieceTokenizer(model_file, nullptr) {}

SentencePieceTokenizer::SentencePieceTokenizer(std::string model_file, std::shared_ptr<const Impl> impl)
    : model_file_(std::move(model_file)), impl_(std::move(impl)) {
  if (!impl_) {
    const std::string bytes = detail::read_file(model_file_, "SentencePiece model");
    impl_ = load_model(model_file_, bytes);
  }
}

std::shared_ptr<const SentencePieceTokenizer::Impl> SentencePieceTokenizer::load_model(const std::string& model_file,
                                                                                       const std::string& bytes) {
  auto impl = std::make_shared<Impl>();
  impl->api = &require_api();
  std::string error;
  impl->processor = impl->api->load(bytes, &error);
  if (impl->processor == nullptr) {
    throw DataError("SentencePieceTokenizer: '" + model_file + "' is not a SentencePiece model (" + error +
                    "). Pass the .model file that spm_train or SentencePieceTokenizer::train wrote, not the .vocab.");
  }
  impl->fingerprint = "sentencepiece:" + std::to_string(bytes.size()) + ":" + detail::hex64(detail::fnv1a64(bytes));
  return impl;
}

bool SentencePieceTokenizer::available() {
  return sentencepiece_api(nullptr) != nullptr;
}

SentencePieceTokenizer SentencePieceTokenizer::train(const SentencePieceTrainOptions& o) {
  namespace fs = std::filesystem;
  const std::string where = "SentencePieceTokenizer::train: ";
  const SentencePieceApi& api = require_api();
  std::error_code ec;
  if (o.input.empty()) throw ConfigError(where + "options.input is empty; give the text file to learn from.");
  if (!fs::is_regular_file(o.input, ec)) {
    throw DataError(where + "the input '" + o.input + "' " +
                    (fs::exists(o.input, ec) ? "is not a regular file" : "does not exist") +
                    ". Give a UTF-8 text file, one sentence per line.");
  }
  if (fs::file_size(o.input, ec) == 0) {
    throw DataError(where + "the input '" + o.input + "' is empty; there is nothing to learn a vocabulary from.");
  }
  if (o.model_file.empty()) {
    throw ConfigError(where + "options.model_file is empty; give the path the .model file goes to.");
  }
  const fs::path folder = fs::path(o.model_file).parent_path();
  if (!folder.empty() && !fs::is_directory(folder, ec)) {
    throw ConfigError(where + "the folder of model_file '" + o.model_file + "' does not exist. Create it first.");
  }
  static const std::vector<std::string> kTypes = {"unigram", "bpe", "char", "word"};
  if (std::find(kTypes.begin(), kTypes.end(), o.model_type) == kTypes.end()) {
    throw ConfigError(where + "model_type '" + o.model_type + "' is not one of unigram, bpe, char, word.");
  }
  if (o.vocab_size < 1 || o.vocab_size > (int64_t{1} << 30)) {
    throw ConfigError(where + "vocab_size " + std::to_string(o.vocab_size) + " is out of range; give e.g. 8000.");
  }
  if (!(o.character_coverage > 0.0 && o.character_coverage <= 1.0)) {
    throw ConfigError(where + "character_coverage " + std::to_string(o.character_coverage) +
                      " must lie in (0, 1]; 0.9995 is SentencePiece's default, 1.0 keeps every character.");
  }
  if (o.num_threads < 1 || o.input_sentence_size < 0 || o.max_sentence_length < 1) {
    throw ConfigError(where + "num_threads (" + std::to_string(o.num_threads) + ") and max_sentence_length (" +
                      std::to_string(o.max_sentence_length) + ") must be at least 1, input_sentence_size (" +
                      std::to_string(o.input_sentence_size) + ") at least 0.");
  }
  const std::pair<const char*, int64_t> ids[] = {
      {"unk_id", o.unk_id}, {"bos_id", o.bos_id}, {"eos_id", o.eos_id}, {"pad_id", o.pad_id}};
  if (o.unk_id < 0) throw ConfigError(where + "unk_id must be an id (SentencePiece always has unk), got -1.");
  for (size_t i = 0; i < 4; ++i) {
    if (ids[i].second < -1 || ids[i].second >= o.vocab_size) {
      throw ConfigError(where + ids[i].first + " " + std::to_string(ids[i].second) + " is outside the vocabulary (0.." +
                        std::to_string(o.vocab_size - 1) + ", or -1 for none).");
    }
    for (size_t j = 0; j < i; ++j) {
      if (ids[i].second >= 0 && ids[i].second == ids[j].second) {
        throw ConfigError(where + ids[j].first + " and " + ids[i].first + " are both " + std::to_string(ids[i].second) +
                          "; give each special token its own id (or -1).");
      }
    }
  }
  const std::unordered_map<std::string, std::string> kwargs = {
      {"input", o.input},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"model_type", o.model_type},
      {"character_coverage", std::to_string(o.character_coverage)},
      {"input_sentence_size", std::to_string(o.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", std::to_string(o.max_sentence_length)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"num_threads", std::to_string(o.num_threads)},
      {"unk_id", std::to_string(o.unk_id)},
      {"bos_id", std::to_string(o.bos_id)},
      {"eos_id", std::to_string(o.eos_id)},
      {"pad_id", std::to_string(o.pad_id)},
      {"minloglevel", o.verbose ? "0" : "1"},
  };
  std::string serialized;
  std::string error;
  if (!api.train(kwargs, &serialized, &error)) {
    throw ConfigError(where + "SentencePiece refused to train a " + o.model_type + " model of vocab_size " +
                      std::to_string(o.vocab_size) + " on '" + o.input + "': " + error);
  }
  auto impl = load_model(o.model_file, serialized);
  detail::AtomicFile file(o.model_file, "SentencePiece model");
  file.write(serialized.data(), serialized.size());
  file.commit();
  return SentencePieceTokenizer(o.model_file, std::move(impl));
}

std::vector<int64_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  std::string error;
  if (!impl_->api->encode(impl_->processor, text, &ids, &error)) {
    throw DataError("SentencePieceTokenizer::encode (model '" + model_file_ + "'): " + error);
  }
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids) const {
  const int64_t n = vocab_size();
  std::vector<int> narrow(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n) {
      throw DataError("SentencePieceTokenizer::decode: id " + std::to_string(ids[i]) + " at position " +
                      std::to_string(i) + " is outside the vocabulary of '" + model_file_ + "' (0.." +
                      std::to_string(n - 1) + ").");
    }
    narrow[i] = static_cast<int>(ids[i]);
  }
  std::string text;
  std::string error;
  if (!impl_->api->decode(impl_->processor, narrow, &text, &error)) {
    throw DataError("SentencePieceTokenizer::decode (model '" + model_file_ + "'): " + error);
  }
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const {
  return impl_->api->piece_size(impl_->processor);
}

SpecialIds SentencePieceTokenizer::special_ids() const {
  const auto& a = *impl_->api;
  return {a.special_id(impl_->processor, 0), a.special_id(impl_->processor, 1), a.special_id(impl_->processor, 2),
          a.special_id(impl_->processor, 3)};
}

std::string SentencePieceTokenizer::fingerprint() const {
  return impl_->fingerprint;
}

std::string SentencePieceTokenizer::id_to_piece(int64_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw DataError("SentencePieceTokenizer::id_to_piece: id " + std::to_string(id) +
                    " is outside the vocabulary (0.." + std::to_string(vocab_size() - 1) + ").");
  }
  return impl_->api->id_to_piece(impl_->processor, static_cast<int>(id));
}

}  // namespace volt::data
