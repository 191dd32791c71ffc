#pragma once
// The table of functions the SentencePiece module (libvolt_sentencepiece.so, tools/../sentencepiece_module.cpp)
// exports. Debian's libsentencepiece carries its own copy of protobuf-lite and exports its symbols; linked into a
// process that also has LibTorch's libprotobuf, the two copies interpose each other and the process crashes while
// loading. So the library is linked only into this module, which Volt opens with dlopen(RTLD_LOCAL | RTLD_DEEPBIND):
// the module and libsentencepiece resolve their protobuf symbols in their own copy, LibTorch in its own.
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace volt::data::detail {

struct SentencePieceApi {
  static constexpr int kVersion = 1;
  int version = kVersion;
  /// A processor for the serialized model; nullptr and *error set when it is not a model.
  void* (*load)(const std::string& serialized, std::string* error);
  void (*destroy)(void* processor);
  bool (*encode)(const void* processor, std::string_view text, std::vector<int>* ids, std::string* error);
  bool (*decode)(const void* processor, const std::vector<int>& ids, std::string* text, std::string* error);
  int (*piece_size)(const void* processor);
  /// 0 unk, 1 bos, 2 eos, 3 pad.
  int (*special_id)(const void* processor, int which);
  std::string (*id_to_piece)(const void* processor, int id);
  /// Trains with SentencePiece's flags; the serialized model in *model, or false and *error.
  bool (*train)(const std::unordered_map<std::string, std::string>& flags, std::string* model, std::string* error);
};

}  // namespace volt::data::detail

extern "C" const volt::data::detail::SentencePieceApi* volt_sentencepiece_api();
