#include "volt/checkpoint_io/torch_checkpoint_io.h"

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

#include "checkpoint_io/detail/torch_archive.h"
#include "volt/checkpoint_io/zip_integrity.h"
#include "volt/core/error.h"
#include "volt/core/error_boundary.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"

namespace fs = std::filesystem;

namespace volt::checkpoint_io {
namespace {

std::string os_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: some filesystems refuse to open folders
  ::fsync(fd);
  ::close(fd);
}

std::atomic<BeforeRenameHook> g_before_rename{nullptr};

/// The writer's pid of a temporary file named ".<target>.tmp.<pid>" or
/// ".<target>.tmp.<pid>.<n>" (for `name` = target; any target when `name` is empty), else 0.
long temp_file_writer(const std::string& entry, const std::string& name) {
  if (entry.size() < 2 || entry[0] != '.') return 0;
  size_t rest_at = 0;
  if (!name.empty()) {
    const std::string prefix = "." + name + ".tmp.";
    if (entry.compare(0, prefix.size(), prefix) != 0) return 0;
    rest_at = prefix.size();
  } else {
    const auto tmp = entry.rfind(".tmp.");
    if (tmp == std::string::npos || tmp == 0) return 0;
    rest_at = tmp + 5;
  }
  const std::string rest = entry.substr(rest_at);
  if (rest.empty() || !std::isdigit(static_cast<unsigned char>(rest[0]))) return 0;
  char* end_ptr = nullptr;
  const long pid = std::strtol(rest.c_str(), &end_ptr, 10);
  if (pid <= 0) return 0;
  if (*end_ptr == '\0') return pid;
  if (*end_ptr != '.') return 0;
  const char* counter = end_ptr + 1;
  if (*counter == '\0') return 0;
  for (const char* c = counter; *c != '\0'; ++c) {
    if (!std::isdigit(static_cast<unsigned char>(*c))) return 0;
  }
  return pid;
}

bool process_is_gone(long pid) {
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

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

/// Removes ".<name>.tmp.<pid>.<n>" files that a process which no longer exists left
/// behind when it died between creating and renaming them (a crash, SIGKILL). Files of
/// live processes (this one, or another writer) are left alone.
void remove_orphaned_temp_files(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  for (fs::directory_iterator it(dir.empty() ? fs::path(".") : dir, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = temp_file_writer(it->path().filename().string(), name);
    if (pid > 0 && process_is_gone(pid)) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

int64_t remove_dead_temp_files_under(const fs::path& dir, int depth, int64_t& budget) {
  int64_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end && budget > 0; it.increment(ec), --budget) {
    std::error_code kind_ec;
    const auto status = it->symlink_status(kind_ec);
    if (kind_ec) continue;
    if (fs::is_directory(status)) {
      if (depth > 0) removed += remove_dead_temp_files_under(it->path(), depth - 1, budget);
      continue;
    }
    if (!fs::is_regular_file(status)) continue;
    const long pid = temp_file_writer(it->path().filename().string(), "");
    if (pid > 0 && process_is_gone(pid)) {
      std::error_code ignored;
      if (fs::remove(it->path(), ignored)) ++removed;
    }
  }
  return removed;
}

}  // namespace

int64_t remove_dead_writers_temp_files(const std::string& root) {
  if (file_kind(root) != FileKind::kDirectory) return 0;
  // A bounded scan: the root may be a large shared folder.
  int64_t budget = 100000;
  return remove_dead_temp_files_under(fs::path(root), 4, budget);
}

BeforeRenameHook set_before_rename_hook(BeforeRenameHook hook) {
  return g_before_rename.exchange(hook);
}

namespace {

/// Receives the file's bytes in pieces; false when the write failed (errno kept).
using ByteSink = std::function<bool(const void*, size_t)>;

/// atomic_write, with the bytes produced piece by piece by `produce` straight into the
/// temporary file (a 400 MB checkpoint is never held twice in memory). An exception from
/// `produce` or a failed write removes the temporary file and leaves the target alone.
void atomic_write_stream(const std::string& path, const std::function<void(const ByteSink&)>& produce) {
  const fs::path target(path);
  const fs::path dir = target.parent_path();
  std::error_code ec;
  if (!dir.empty()) {
    fs::create_directories(dir, ec);
    if (ec) throw Error("cannot create folder '" + dir.string() + "' for '" + path + "': " + ec.message());
  }
  static std::atomic<unsigned> counter{0};
  const fs::path tmp =
      (dir.empty() ? fs::path(".") : dir) /
      ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(os_error("cannot create temporary file", tmp.string()));
  int write_errno = 0;
  const ByteSink sink = [&](const void* bytes, size_t size) {
    if (write_errno != 0) return false;
    const char* p = static_cast<const char*>(bytes);
    while (size > 0) {
      const ssize_t n = ::write(fd, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        write_errno = errno;
        return false;
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  };
  auto fail = [&](const std::string& msg) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(msg);
  };
  try {
    produce(sink);
  } catch (const std::exception& e) {
    if (write_errno != 0) errno = write_errno;
    fail(write_errno != 0 ? os_error("cannot write", tmp.string()) : std::string(e.what()));
  }
  if (write_errno != 0) {
    errno = write_errno;
    fail(os_error("cannot write", tmp.string()));
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string msg = os_error("cannot flush", tmp.string());
    ::unlink(tmp.c_str());
    throw Error(msg);
  }
  if (const BeforeRenameHook hook = g_before_rename.load()) hook(tmp.string(), path);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const std::string msg = os_error("cannot rename temporary file onto", path);
    ::unlink(tmp.c_str());
    throw Error(msg);
  }
  fsync_dir(dir);
  remove_orphaned_temp_files(dir, target.filename().string());
}

/// The mapped file as LibTorch's zip reader sees it.
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

void atomic_write(const std::string& path, const void* bytes, size_t size) {
  atomic_write_stream(path, [&](const ByteSink& sink) { sink(bytes, size); });
}

void TorchCheckpointIO::save_checkpoint(const Checkpoint& checkpoint, const std::string& path) {
  const FileKind kind = file_kind(path);
  if (path.empty() || (kind != FileKind::kMissing && kind != FileKind::kRegular)) {
    throw CheckpointError("cannot save a checkpoint to " + quote_path(path) + ": " +
                          (path.empty() ? std::string("the path is empty") : std::string("it is ") + describe(kind)) +
                          ". Give a file path such as runs/last.ckpt.");
  }
  if (const std::string why = folder_problem(fs::path(path).parent_path().string(), "the checkpoint's folder");
      !why.empty()) {
    throw CheckpointError("cannot save a checkpoint to " + quote_path(path) + ": " + why);
  }
  try {
    save_archive(checkpoint, path);
  } catch (...) {
    rethrow_as_volt_error("saving the checkpoint " + quote_path(path), ErrorKind::kCheckpoint);
  }
}

void TorchCheckpointIO::save_archive(const Checkpoint& checkpoint, const std::string& path) {
  c10::Dict<std::string, at::Tensor> tensors;
  for (const auto& [key, t] : checkpoint.tensors) {
    // Detached, contiguous CPU copies: the archive must not depend on autograd or device.
    tensors.insert(key, t.detach().to(at::kCPU).contiguous());
  }
  c10::Dict<std::string, at::Tensor> blobs;
  for (const auto& [key, bytes] : checkpoint.blobs) {
    at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    blobs.insert(key, t);
  }
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("tensors", tensors);
  root.insert("blobs", blobs);
  root.insert("meta", checkpoint.meta.dump());
  try {
    // What torch::jit::pickle_save does (the format torch.load reads), but the zip
    // archive goes straight into the file instead of into a vector first.
    atomic_write_stream(path, [&](const ByteSink& sink) {
      std::vector<char> pickle;
      torch::jit::Pickler pickler(
          [&](const char* bytes, size_t size) { pickle.insert(pickle.end(), bytes, bytes + size); });
      pickler.protocol();
      pickler.pushIValue(root);
      pickler.stop();
      // A failed write is remembered by the sink and raised after the archive is done:
      // reporting it to the zip writer would make its destructor throw (terminate).
      caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t size) -> size_t {
        sink(bytes, size);
        return size;
      });
      torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
      writer.writeEndOfFile();
    });
  } catch (const Error& e) {
    throw CheckpointError(std::string("saving checkpoint failed: ") + e.what());
  }
}

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

Checkpoint TorchCheckpointIO::load_checkpoint(const std::string& path) {
  const detail::TorchArchive archive =
      detail::read_torch_archive(path, "checkpoint", "Volt checkpoint", "a .ckpt file that Volt wrote");
  const std::string name = detail::file_label(path, "checkpoint");
  try {
    return unpack(archive.root, name);
  } catch (const CheckpointError&) {
    throw;
  } catch (...) {
    rethrow_as_volt_error(name + " has entries of the wrong type; it was not written by Volt or is damaged",
                          ErrorKind::kCheckpoint);
  }
}

Checkpoint TorchCheckpointIO::unpack(const c10::IValue& root, const std::string& name) {
  if (!root.isGenericDict()) {
    throw CheckpointError(name + " holds a " + root.tagKind() + ", not the dict a Volt checkpoint holds.");
  }
  auto dict = root.toGenericDict();
  Checkpoint ckpt;
  for (const char* key : {"tensors", "blobs", "meta"}) {
    if (!dict.contains(key)) {
      throw CheckpointError(name + " has no '" + key + "' entry; it was not written by Volt.");
    }
  }
  // A damaged or foreign file may hold anything under these keys: check each type before reading it.
  auto foreign = [&](const std::string& what, const c10::IValue& got) {
    return CheckpointError(name + " has " + what + " of the wrong type (a " + got.tagKind() +
                           "); it was not written by Volt or is damaged.");
  };
  for (const char* key : {"tensors", "blobs"}) {
    if (!dict.at(key).isGenericDict()) throw foreign(std::string("a '") + key + "' entry", dict.at(key));
    for (const auto& item : dict.at(key).toGenericDict()) {
      if (!item.key().isString()) throw foreign(std::string("a name in '") + key + "'", item.key());
      const std::string where = std::string("'") + key + "' entry " + quote_path(item.key().toStringRef());
      if (!item.value().isTensor()) throw foreign(where, item.value());
      const at::Tensor& t = item.value().toTensor();
      if (std::string(key) == "blobs" && (t.scalar_type() != at::kByte || t.layout() != at::kStrided || t.dim() != 1)) {
        throw CheckpointError(name + " has " + where + " of type " + c10::toString(t.scalar_type()) + " with " +
                              std::to_string(t.dim()) +
                              " dimension(s), not the 1-D uint8 bytes Volt writes; it was not written by Volt.");
      }
    }
  }
  for (const auto& item : dict.at("tensors").toGenericDict()) {
    ckpt.tensors.emplace(item.key().toStringRef(), item.value().toTensor());
  }
  for (const auto& item : dict.at("blobs").toGenericDict()) {
    const at::Tensor t = item.value().toTensor().contiguous();
    ckpt.blobs.emplace(item.key().toStringRef(),
                       std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel())));
  }
  if (!dict.at("meta").isString()) throw foreign("a 'meta' entry", dict.at("meta"));
  try {
    ckpt.meta = nlohmann::json::parse(dict.at("meta").toStringRef());
  } catch (const std::exception& e) {
    throw CheckpointError(name + " has malformed metadata: " + e.what());
  }
  if (!ckpt.meta.is_object() && !ckpt.meta.is_null()) {
    throw CheckpointError(name + " has metadata that is a JSON " + ckpt.meta.type_name() +
                          ", not the object Volt writes.");
  }
  return ckpt;
}

void TorchCheckpointIO::remove_checkpoint(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) throw CheckpointError("cannot remove checkpoint '" + path + "': " + ec.message());
}

}  // namespace volt::checkpoint_io
