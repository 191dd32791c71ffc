// libvolt_sentencepiece.so: Debian's libsentencepiece behind the function table of
// src/data/text/detail/sentencepiece_api.h (why it is a separate module is said there).
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "data/text/detail/sentencepiece_api.h"

namespace {

using sentencepiece::SentencePieceProcessor;

void* load(const std::string& serialized, std::string* error) {
  auto* p = new SentencePieceProcessor();
  const auto status = p->LoadFromSerializedProto(serialized);
  if (!status.ok()) {
    *error = status.ToString();
    delete p;
    return nullptr;
  }
  return p;
}

void destroy(void* p) {
  delete static_cast<SentencePieceProcessor*>(p);
}

bool encode(const void* p, std::string_view text, std::vector<int>* ids, std::string* error) {
  const auto status = static_cast<const SentencePieceProcessor*>(p)->Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool decode(const void* p, const std::vector<int>& ids, std::string* text, std::string* error) {
  const auto status = static_cast<const SentencePieceProcessor*>(p)->Decode(ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int piece_size(const void* p) {
  return static_cast<const SentencePieceProcessor*>(p)->GetPieceSize();
}

int special_id(const void* p, int which) {
  const auto* sp = static_cast<const SentencePieceProcessor*>(p);
  switch (which) {
    case 0:
      return sp->unk_id();
    case 1:
      return sp->bos_id();
    case 2:
      return sp->eos_id();
    default:
      return sp->pad_id();
  }
}

std::string id_to_piece(const void* p, int id) {
  return static_cast<const SentencePieceProcessor*>(p)->IdToPiece(id);
}

bool train(const std::unordered_map<std::string, std::string>& flags, std::string* model, std::string* error) {
  const auto status = sentencepiece::SentencePieceTrainer::Train(flags, nullptr, model);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

const volt::data::detail::SentencePieceApi kApi{volt::data::detail::SentencePieceApi::kVersion,
                                                load,
                                                destroy,
                                                encode,
                                                decode,
                                                piece_size,
                                                special_id,
                                                id_to_piece,
                                                train};

}  // namespace

extern "C" __attribute__((visibility("default"))) const volt::data::detail::SentencePieceApi* volt_sentencepiece_api() {
  return &kApi;
}
