#include "volt/data/text/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "data/text/detail/text_files.h"
#include "volt/core/error.h"

namespace volt::data {
namespace {

constexpr char kMagic[8] = {'V', 'O', 'L', 'T', 'T', 'O', 'K', '1'};
constexpr size_t kHeaderBytes = 64;
// Text encoded per block; each block's lines are split among the threads.
constexpr size_t kBlockBytes = size_t{8} << 20;

struct Header {
  char magic[8];
  uint32_t token_bytes;
  uint32_t flags;  // bit 0: append_eos
  uint64_t tokens;
  uint64_t vocab_size;
  uint64_t tokenizer_hash;
  uint64_t corpus_hash;
  uint64_t corpus_bytes;
  uint64_t reserved;
};
static_assert(sizeof(Header) == kHeaderBytes, "the token file header is 64 bytes");

// A read-only mapping of a whole file; empty files map to nothing.
struct Mapping {
  void* data = nullptr;
  size_t bytes = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (data != nullptr) ::munmap(data, bytes);
  }
};

// Maps `path`, or throws DataError naming it (with `what`).
void map_file(const std::string& path, const std::string& what, Mapping* m) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw DataError("the " + what + " '" + path + "' does not exist. Check the path.");
  }
  if (!std::filesystem::is_regular_file(status)) {
    throw DataError("the " + what + " '" + path + "' is not a regular file (a folder, device or FIFO).");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError("the " + what + " '" + path + "' cannot be opened: " + std::strerror(errno) + ".");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw DataError("the " + what + " '" + path + "' cannot be read: " + std::strerror(e) + ".");
  }
  m->bytes = static_cast<size_t>(st.st_size);
  if (m->bytes > 0) {
    void* p = ::mmap(nullptr, m->bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw DataError("the " + what + " '" + path + "' cannot be mapped: " + std::strerror(e) + ".");
    }
    m->data = p;
  }
  ::close(fd);
}

int token_bytes_for(TokenDtype dtype, int64_t vocab_size) {
  switch (dtype) {
    case TokenDtype::kUInt16:
      return 2;
    case TokenDtype::kUInt32:
      return 4;
    case TokenDtype::kAuto:
      break;
  }
  return vocab_size <= 65536 ? 2 : 4;
}

}  // namespace

uint64_t tokenizer_hash(const Tokenizer& tokenizer) {
  return detail::fnv1a64(tokenizer.fingerprint());
}

uint64_t corpus_hash(const std::string& corpus) {
  Mapping m;
  map_file(corpus, "corpus", &m);
  return detail::fnv1a64(std::string_view(static_cast<const char*>(m.data), m.bytes));
}

TokenFileInfo write_token_file(const std::string& corpus, const Tokenizer& tokenizer, const std::string& token_file,
                               const TokenFileOptions& options) {
  const std::string where = "write_token_file: ";
  if (options.num_threads < 1) {
    throw ConfigError(where + "num_threads must be at least 1, got " + std::to_string(options.num_threads) + ".");
  }
  const int64_t vocab = tokenizer.vocab_size();
  const int width = token_bytes_for(options.dtype, vocab);
  if (width == 2 && vocab > 65536) {
    throw ConfigError(where + "a vocabulary of " + std::to_string(vocab) +
                      " ids does not fit in uint16 tokens (at most 65536). Use TokenDtype::kUInt32 or kAuto.");
  }
  const int64_t eos = tokenizer.special_ids().eos;
  if (options.append_eos && eos < 0) {
    throw ConfigError(where + "append_eos is set but the tokenizer (" + tokenizer.fingerprint() +
                      ") has no eos id. Use a tokenizer with an eos token or leave append_eos off.");
  }
  Mapping text_map;
  map_file(corpus, "corpus", &text_map);
  if (text_map.bytes == 0) {
    throw DataError(where + "the corpus '" + corpus + "' is empty; there is no text to tokenize.");
  }
  const std::string_view text(static_cast<const char*>(text_map.data), text_map.bytes);
  ::madvise(text_map.data, text_map.bytes, MADV_SEQUENTIAL);

  TokenFileInfo info;
  info.vocab_size = vocab;
  info.token_bytes = width;
  info.tokenizer_hash = tokenizer_hash(tokenizer);
  info.corpus_hash = detail::fnv1a64(text);
  info.corpus_bytes = text.size();
  info.append_eos = options.append_eos;

  detail::AtomicFile out(token_file, "token file");
  Header header{};
  out.write(&header, sizeof(header));  // completed at the end, when the count is known

  // [begin, end) of text as whole lines (each ending after its '\n', the last maybe without one).
  auto encode_lines = [&](size_t begin, size_t end, std::vector<int64_t>* ids) {
    while (begin < end) {
      const size_t nl = text.find('\n', begin);
      const size_t stop = nl == std::string_view::npos || nl >= end ? end : nl + 1;
      const std::vector<int64_t> line = tokenizer.encode(text.substr(begin, stop - begin));
      ids->insert(ids->end(), line.begin(), line.end());
      if (options.append_eos) ids->push_back(eos);
      begin = stop;
    }
  };
  auto line_end_after = [&](size_t pos) {
    if (pos >= text.size()) return text.size();
    const size_t nl = text.find('\n', pos);
    return nl == std::string_view::npos ? text.size() : nl + 1;
  };

  const auto threads = static_cast<size_t>(options.num_threads);
  std::vector<std::vector<int64_t>> parts(threads);
  std::vector<uint8_t> packed;
  size_t block = 0;
  while (block < text.size()) {
    const size_t block_end = line_end_after(std::min(text.size(), block + kBlockBytes) - 1);
    std::vector<size_t> cuts{block};
    for (size_t t = 1; t < threads; ++t) {
      const size_t guess = block + (block_end - block) * t / threads;
      cuts.push_back(std::clamp(guess > block ? line_end_after(guess - 1) : block, cuts.back(), block_end));
    }
    cuts.push_back(block_end);
    for (auto& p : parts) p.clear();
    if (threads == 1) {
      encode_lines(cuts[0], cuts[1], &parts[0]);
    } else {
      std::vector<std::thread> pool;
      std::vector<std::exception_ptr> errors(threads);
      for (size_t t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          try {
            encode_lines(cuts[t], cuts[t + 1], &parts[t]);
          } catch (...) {
            errors[t] = std::current_exception();
          }
        });
      }
      for (auto& th : pool) th.join();
      for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    }
    for (const auto& ids : parts) {
      packed.resize(ids.size() * static_cast<size_t>(width));
      for (size_t i = 0; i < ids.size(); ++i) {
        const int64_t id = ids[i];
        if (id < 0 || id >= vocab) {
          throw DataError(where + "the tokenizer returned id " + std::to_string(id) + ", outside its vocabulary of " +
                          std::to_string(vocab) + ", while encoding '" + corpus + "'.");
        }
        if (width == 2) {
          const auto v = static_cast<uint16_t>(id);
          std::memcpy(packed.data() + 2 * i, &v, 2);
        } else {
          const auto v = static_cast<uint32_t>(id);
          std::memcpy(packed.data() + 4 * i, &v, 4);
        }
      }
      out.write(packed.data(), packed.size());
      info.tokens += static_cast<int64_t>(ids.size());
    }
    block = block_end;
  }

  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.token_bytes = static_cast<uint32_t>(width);
  header.flags = options.append_eos ? 1u : 0u;
  header.tokens = static_cast<uint64_t>(info.tokens);
  header.vocab_size = static_cast<uint64_t>(vocab);
  header.tokenizer_hash = info.tokenizer_hash;
  header.corpus_hash = info.corpus_hash;
  header.corpus_bytes = info.corpus_bytes;
  out.write_at(0, &header, sizeof(header));
  out.commit();
  return info;
}

TokenFile::TokenFile(std::string path) : path_(std::move(path)) {
  auto mapping = std::make_unique<Mapping>();
  map_file(path_, "token file", mapping.get());
  const std::string where = "TokenFile: '" + path_ + "' ";
  const std::string rewrite =
      " Delete it and write it again with write_token_file (TokenWindowDataset::from_corpus "
      "does that when the file is absent).";
  if (mapping->bytes < kHeaderBytes) {
    throw DataError(where + "has " + std::to_string(mapping->bytes) + " bytes, fewer than the " +
                    std::to_string(kHeaderBytes) + "-byte header: it is truncated or not a token file." + rewrite);
  }
  Header header;
  std::memcpy(&header, mapping->data, sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) {
    throw DataError(where + "is not a token file (it does not start with \"VOLTTOK1\")." + rewrite);
  }
  if (header.token_bytes != 2 && header.token_bytes != 4) {
    throw DataError(where + "declares " + std::to_string(header.token_bytes) +
                    "-byte tokens; token files hold 2 or 4." + rewrite);
  }
  const uint64_t expected = kHeaderBytes + header.tokens * header.token_bytes;
  if (header.tokens > (uint64_t{1} << 60) || expected != mapping->bytes) {
    throw DataError(where + "has the wrong size: " + std::to_string(mapping->bytes) +
                    " bytes, but its header "
                    "announces " +
                    std::to_string(header.tokens) + " tokens of " + std::to_string(header.token_bytes) + " bytes (" +
                    std::to_string(kHeaderBytes) + " + " + std::to_string(header.tokens) + " x " +
                    std::to_string(header.token_bytes) + " = " + std::to_string(expected) +
                    " bytes): it was truncated or appended to." + rewrite);
  }
  info_.tokens = static_cast<int64_t>(header.tokens);
  info_.vocab_size = static_cast<int64_t>(header.vocab_size);
  info_.token_bytes = static_cast<int>(header.token_bytes);
  info_.tokenizer_hash = header.tokenizer_hash;
  info_.corpus_hash = header.corpus_hash;
  info_.corpus_bytes = header.corpus_bytes;
  info_.append_eos = (header.flags & 1u) != 0;
  map_ = mapping->data;
  map_bytes_ = mapping->bytes;
  mapping->data = nullptr;
  data_ = static_cast<const char*>(map_) + kHeaderBytes;
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

void TokenFile::copy(int64_t start, int64_t count, int64_t* out) const {
  if (start < 0 || count < 0 || start + count > info_.tokens) {
    throw DataError("TokenFile: tokens [" + std::to_string(start) + ", " + std::to_string(start + count) +
                    ") are outside '" + path_ + "', which holds " + std::to_string(info_.tokens) + " tokens.");
  }
  if (info_.token_bytes == 2) {
    const auto* p = static_cast<const uint16_t*>(data_) + start;
    for (int64_t i = 0; i < count; ++i) out[i] = p[i];
  } else {
    const auto* p = static_cast<const uint32_t*>(data_) + start;
    for (int64_t i = 0; i < count; ++i) out[i] = p[i];
  }
}

}  // namespace volt::data
