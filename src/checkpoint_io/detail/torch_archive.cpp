// Reading a torch.save-style archive with every check done first (see torch_archive.h): the
// pickle's opcodes walked before LibTorch's unpickler runs, every tensor checked against the
// record that holds its bytes.
#include "checkpoint_io/detail/torch_archive.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <vector>

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include "volt/checkpoint_io/zip_integrity.h"
#include "volt/core/error.h"
#include "volt/core/error_boundary.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"

namespace fs = std::filesystem;

namespace volt::checkpoint_io {
namespace {

// What in a pickle LibTorch 1.13's unpickler would act on unchecked, or "" when nothing: it pops TUPLE2,
// TUPLE3 and NEWOBJ arguments from its stack without looking (a heap corruption, SIGSEGV or SIGABRT on a
// crafted file), sizes a string to the length a field declares and its memo table to the largest index
// named (gigabytes from a 2 KB file). So the opcodes are walked first, with their stack effects; torch.save
// and Volt write the binary opcodes of protocols 2 to 4, and anything else is refused too.
std::string pickle_problem(const unsigned char* p, size_t n) {
  size_t i = 0;
  int64_t depth = 0;
  std::vector<int64_t> marks;
  auto le = [&](int bytes) {
    uint64_t v = 0;
    for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[i + b];
    return v;
  };
  while (i < n) {
    const size_t at = i;
    const unsigned char op = p[i++];
    const auto where = [&] { return " at byte " + std::to_string(at); };
    int64_t pops = 0, pushes = 1;
    int length_bytes = 0;
    size_t fixed = 0;
    bool to_mark = false;  // pops down to the last MARK
    switch (op) {
      case 'N':
      case 0x88:
      case 0x89:
      case '}':
      case ']':
      case ')':
      case 0x8f:
        break;
      case 'J':
        fixed = 4;
        break;
      case 'K':
        fixed = 1;
        break;
      case 'M':
        fixed = 2;
        break;
      case 'G':
        fixed = 8;
        break;
      case 'h':
        fixed = 1;
        break;
      case 'j':
        fixed = 4;
        break;
      case 0x8a:
      case 0x8c:
      case 'U':
      case 'C':
        length_bytes = 1;
        break;
      case 0x8b:
      case 'X':
      case 'T':
      case 'B':
        length_bytes = 4;
        break;
      case 0x8d:
      case 0x8e:
        length_bytes = 8;
        break;
      case 'c':  // GLOBAL: module and name, each ending in a newline
        for (int lines = 0; lines < 2; ++i) {
          if (i >= n) return "ends inside a GLOBAL" + where();
          lines += p[i] == '\n';
        }
        break;
      case '(':
        marks.push_back(depth);
        pushes = 0;
        break;
      case 'q':
      case 'r': {  // BINPUT, LONG_BINPUT: the memo table grows to the index
        const int bytes = op == 'q' ? 1 : 4;
        if (static_cast<size_t>(bytes) > n - i) return "ends inside an opcode" + where();
        if (le(bytes) > n) return "names memo slot " + std::to_string(le(bytes)) + where();
        i += bytes;
        pops = 1;
        break;
      }
      case 0x94:
        pops = 1;
        break;  // MEMOIZE
      case 'Q':
      case 0x85:
        pops = 1;
        break;  // BINPERSID, TUPLE1
      case '2':
        pops = 1;
        pushes = 2;
        break;  // DUP
      case '0':
        pops = 1;
        pushes = 0;
        break;  // POP
      case 'R':
      case 'b':
      case 0x81:
      case 0x93:
      case 0x86:
      case 'a':
        pops = 2;
        break;
      case 0x87:
      case 's':
        pops = 3;
        break;  // TUPLE3, SETITEM
      case 't':
      case 0x91:
        to_mark = true;
        break;  // TUPLE, FROZENSET
      case 'e':
      case 'u':
      case 0x90:
        to_mark = true;
        pushes = 0;
        break;  // APPENDS, SETITEMS, ADDITEMS
      case '1':
        to_mark = true;
        pushes = 0;
        break;  // POP_MARK
      case 0x80:
        fixed = 1;
        pushes = 0;
        break;  // PROTO
      case 0x95:
        fixed = 8;
        pushes = 0;
        break;  // FRAME
      case '.':
        return depth >= 1 ? "" : "stops with nothing on the stack" + where();
      default: {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", op);
        return std::string("uses opcode ") + hex + where() + ", which Volt does not read";
      }
    }
    if (fixed > n - i) return "ends inside an opcode" + where();
    i += fixed;
    if (length_bytes > 0) {
      if (static_cast<size_t>(length_bytes) > n - i) return "ends inside an opcode" + where();
      const uint64_t length = le(length_bytes);
      i += length_bytes;
      if (length > n - i) {
        return "declares " + std::to_string(length) + " bytes" + where() + " but " + std::to_string(n - i) + " follow";
      }
      i += length;
    }
    const int64_t floor = marks.empty() ? 0 : marks.back();
    if (to_mark) {
      if (marks.empty()) return "pops to a MARK that was never set" + where();
      marks.pop_back();
      if ((op == 'e' || op == 'u' || op == 0x90) && floor < 1) return "fills a container that is not there" + where();
      depth = floor + pushes;
    } else {
      if (depth - floor < pops) return "pops more than its stack holds" + where();
      depth += pushes - pops;
    }
  }
  return "ends without STOP";
}

// Whether every element of a strided tensor lies inside its storage (LibTorch's unpickler builds the view
// that a file's pickle describes without checking it against the bytes there).
bool within_storage(const at::Tensor& t) {
  if (t.layout() != at::kStrided) return false;
  if (t.numel() == 0) return true;
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t reach = 0;
    if (t.stride(d) < 0 || __builtin_mul_overflow(t.size(d) - 1, t.stride(d), &reach) ||
        __builtin_add_overflow(last, reach, &last)) {
      return false;
    }
  }
  int64_t end = 0;
  return last >= 0 && !__builtin_mul_overflow(last + 1, static_cast<int64_t>(t.element_size()), &end) &&
         static_cast<uint64_t>(end) <= t.storage().nbytes();
}

/// A tensor record's address -> its size in bytes, as read from the archive.
using RecordSizes = std::map<const void*, size_t>;

/// Every tensor anywhere in `v` (dicts, lists, tuples) must lie inside the record that holds its bytes.
void check_tensors(const c10::IValue& v, const std::string& name, const RecordSizes& record_bytes, int depth) {
  if (depth > 64) throw CheckpointError(name + " nests its objects more than 64 levels deep; the file is damaged.");
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return;
    const auto record = record_bytes.find(t.storage().data());
    const size_t holds = record == record_bytes.end() ? 0 : record->second;
    if (t.storage().nbytes() > holds) {
      throw CheckpointError(name + " has a tensor whose storage declares " + std::to_string(t.storage().nbytes()) +
                            " bytes but its record holds " + std::to_string(holds) + "; the file is damaged.");
    }
    if (!within_storage(t)) {
      throw CheckpointError(name + " has a tensor whose shape, strides and offset reach past its storage of " +
                            std::to_string(t.storage().nbytes()) + " bytes; the file is damaged.");
    }
  } else if (v.isGenericDict()) {
    for (const auto& item : v.toGenericDict()) {
      check_tensors(item.key(), name, record_bytes, depth + 1);
      check_tensors(item.value(), name, record_bytes, depth + 1);
    }
  } else if (v.isList()) {
    for (const auto& item : v.toListRef()) check_tensors(item, name, record_bytes, depth + 1);
  } else if (v.isTuple()) {
    for (const auto& item : v.toTupleRef().elements()) check_tensors(item, name, record_bytes, depth + 1);
  }
}

class MemoryReadAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  MemoryReadAdapter(const unsigned char* data, size_t size) : data_(data), size_(size) {}
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= size_) return 0;
    n = std::min<size_t>(n, size_ - static_cast<size_t>(pos));
    std::memcpy(buf, data_ + pos, n);
    return n;
  }

 private:
  const unsigned char* data_;
  size_t size_;
};

}  // namespace

namespace detail {

std::string file_label(const std::string& path, const std::string& role) {
  std::error_code size_ec;
  const auto size = static_cast<int64_t>(fs::file_size(path, size_ec));
  return role + " " + quote_path(path) + " (" + std::to_string(size) + " bytes)";
}

TorchArchive read_torch_archive(const std::string& path, const std::string& role, const std::string& kind,
                                const std::string& expected) {
  // By type first: opening a FIFO would wait for a writer, a folder or device is no checkpoint.
  if (const std::string why =
          regular_file_problem(path, role, "Check the path (ckpt_path) or list the folder for .ckpt files.");
      !why.empty()) {
    throw CheckpointError(why);
  }
  if (::access(path.c_str(), R_OK) != 0) {
    throw CheckpointError(role + " " + quote_path(path) + " cannot be opened: " + std::strerror(errno) +
                          ". Check the file's permissions.");
  }
  const std::string name = file_label(path, role);
  TorchArchive out;
  RecordSizes record_bytes;  // tensor record -> its size
  // One mapping for the integrity check and the read: what was verified is what LibTorch reads.
  // Tensors keep the mapping alive and point into it (copy-on-write): their bytes are read once, by the
  // CRC check, and never copied.
  const auto mapping = std::make_shared<const MappedFile>(path, name);
  const MappedFile& file = *mapping;
  const std::string unreadable = name + " is not a readable " + kind + " (truncated or not a checkpoint): ";
  if (!looks_like_zip(file.data(), file.size())) {
    throw CheckpointError(unreadable + "it is not a zip archive, which torch.save and Volt write. Give " + expected +
                          ".");
  }
  std::map<std::string, ZipRecord> records;
  std::string prefix;
  for (auto& r : verify_zip(file.data(), file.size(), name)) {
    const auto slash = r.name.find('/');
    if (slash != std::string::npos && r.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      prefix = r.name.substr(0, slash + 1);
    }
    records.emplace(r.name, std::move(r));
  }
  try {
    // What torch::jit::pickle_load does, but reading the zip records straight from the mapped file
    // instead of from a copy of the whole file in memory.
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<MemoryReadAdapter>(file.data(), file.size()));
    // Every record must lie in the archive's folder: a stray entry is a damaged or foreign file,
    // which LibTorch's own listing refuses (fuzz: "arclive/data/4" was read around, accepted).
    reader.getAllRecords();
    // readArchiveAndTensors, but remembering each tensor record's size: LibTorch gives a storage the size
    // the pickle declares, whatever its record holds (checked below, as reading past it reads the heap).
    auto [pickle, pickle_size] = reader.getRecord("data.pkl");
    const std::string problem = pickle_problem(static_cast<const unsigned char*>(pickle.get()), pickle_size);
    if (!problem.empty()) throw CheckpointError(name + " is damaged: its data.pkl " + problem + ".");
    size_t pickle_read = 0;
    torch::jit::Unpickler unpickler(
        [&, &pickle = pickle, pickle_size = pickle_size](char* buffer, size_t len) -> size_t {
          len = std::min(pickle_size - pickle_read, len);
          std::memcpy(buffer, static_cast<const char*>(pickle.get()) + pickle_read, len);
          pickle_read += len;
          return len;
        },
        nullptr, nullptr,
        [&](const std::string& record) {
          const auto it = records.find(prefix + "data/" + record);
          if (it == records.end()) {
            throw CheckpointError(name + " names a tensor record " + quote_path("data/" + record) +
                                  " that it does not have; the file is damaged.");
          }
          void* bytes = const_cast<unsigned char*>(file.data()) + it->second.data_offset;
          const size_t size = static_cast<size_t>(it->second.size);
          if (it->second.data_offset % 64 != 0) {
            // torch.save aligns tensor records to 64 bytes; another writer's are copied to aligned memory.
            at::DataPtr copy = c10::GetCPUAllocator()->allocate(size);
            if (size > 0) std::memcpy(copy.get(), bytes, size);
            record_bytes[copy.get()] = size;
            return copy;
          }
          record_bytes[bytes] = size;
          return at::DataPtr(
              bytes, new std::shared_ptr<const MappedFile>(mapping),
              [](void* ctx) { delete static_cast<std::shared_ptr<const MappedFile>*>(ctx); }, at::Device(at::kCPU));
        },
        c10::nullopt);
    unpickler.set_version(reader.version());
    out.root = unpickler.parse_ivalue();
  } catch (const CheckpointError&) {
    throw;
  } catch (const c10::Error& e) {
    std::string said = e.what_without_backtrace();
    said = said.substr(0, said.find('\n'));
    if (said.find("INTERNAL ASSERT") != std::string::npos) said = "LibTorch's reader refused its contents";
    throw CheckpointError(unreadable + printable(said) + ". Give " + expected + ".");
  } catch (const std::exception& e) {
    throw CheckpointError(unreadable + printable(e.what()) + ". Give " + expected + ".");
  }
  check_tensors(out.root, name, record_bytes, 0);
  return out;
}

}  // namespace detail

}  // namespace volt::checkpoint_io
