#include "volt/data/idx.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/file_check.h"

namespace volt::data {
namespace {

namespace fs = std::filesystem;

bool under_fashion_mnist(const std::string& path) {
  const std::string dir = kFashionMnistDir;
  return path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

std::string install_hint(const std::string& path) {
  return under_fashion_mnist(path)
             ? " Debian ships these files: apt-get install dataset-fashion-mnist"
             : "";
}

std::string hex_bytes(const unsigned char* bytes, int64_t n) {
  std::string out;
  char buf[4];
  for (int64_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", bytes[i]);
    if (i > 0) out += ' ';
    out += buf;
  }
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    // By type first: gzopen() of a FIFO would wait for a writer.
    if (const std::string why = regular_file_problem(path, "IDX file", under_fashion_mnist(path) ? install_hint(path).substr(1) : "");
        !why.empty()) {
      throw DataError(why);
    }
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      throw DataError("IDX file " + quote_path(path) + " cannot be opened: " +
                      (errno != 0 ? std::strerror(errno) : "out of memory") + ".");
    }
  }
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes, fewer only at the end of the data.
  int64_t read(void* dst, int64_t n) {
    auto* out = static_cast<char*>(dst);
    int64_t total = 0;
    while (total < n) {
      // gzread takes an unsigned count and returns an int: stay well inside both.
      const auto chunk = static_cast<unsigned>(std::min<int64_t>(n - total, int64_t{1} << 30));
      const int got = gzread(file_, out + total, chunk);
      if (got < 0) {
        int code = 0;
        std::string message = gzerror(file_, &code);
        // zlib prefixes its message with the path, which ours already names.
        if (message.compare(0, path_.size() + 2, path_ + ": ") == 0) {
          message.erase(0, path_.size() + 2);
        }
        throw DataError("IDX file " + quote_path(path_) + " cannot be read: " + message +
                        " (a corrupt gzip stream or an I/O error).");
      }
      if (got == 0) break;
      total += got;
    }
    return total;
  }

  // The most bytes a gzip stream can still decompress to: deflate expands at most 1032:1
  // (RFC 1951's longest match per bit), so a corrupt header that announces more than that
  // is refused before anything is allocated. -1 when the size cannot be known.
  int64_t max_gzip_bytes_left() {
    std::error_code ec;
    const auto size = fs::file_size(path_, ec);
    if (ec) return -1;
    const int64_t compressed = static_cast<int64_t>(size);
    if (compressed > std::numeric_limits<int64_t>::max() / 1032 - 1) return -1;
    return compressed * 1032 + 1024;
  }

  // Bytes after the current position for a file gzread passes through uncompressed;
  // -1 for a gzip stream, whose decompressed size is unknown until read.
  int64_t raw_bytes_left() {
    if (gzdirect(file_) == 0) return -1;
    std::error_code ec;
    const auto size = fs::file_size(path_, ec);
    const z_off_t offset = gztell(file_);
    if (ec || offset < 0) return -1;
    return static_cast<int64_t>(size) - static_cast<int64_t>(offset);
  }

  // After a short read: says whether the gzip stream itself was cut off.
  std::string why_short() {
    int code = 0;
    gzerror(file_, &code);
    return code == Z_BUF_ERROR
               ? " The gzip stream ends early: the file was cut off (an interrupted "
                 "download or copy?)."
               : "";
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

struct ElementType {
  at::ScalarType dtype;
  int64_t size;
};

bool element_type(unsigned char code, ElementType* out) {
  switch (code) {
    case 0x08:
      *out = {at::kByte, 1};
      return true;
    case 0x09:
      *out = {at::kChar, 1};
      return true;
    case 0x0B:
      *out = {at::kShort, 2};
      return true;
    case 0x0C:
      *out = {at::kInt, 4};
      return true;
    case 0x0D:
      *out = {at::kFloat, 4};
      return true;
    case 0x0E:
      *out = {at::kDouble, 8};
      return true;
    default:
      return false;
  }
}

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

template <typename U>
void swap_bytes(void* data, int64_t count, U (*swap)(U)) {
  auto* bytes = static_cast<unsigned char*>(data);
  for (int64_t i = 0; i < count; ++i) {
    U value;
    std::memcpy(&value, bytes + i * sizeof(U), sizeof(U));
    value = swap(value);
    std::memcpy(bytes + i * sizeof(U), &value, sizeof(U));
  }
}

uint16_t bswap16(uint16_t v) { return __builtin_bswap16(v); }
uint32_t bswap32(uint32_t v) { return __builtin_bswap32(v); }
uint64_t bswap64(uint64_t v) { return __builtin_bswap64(v); }

void big_endian_to_host(void* data, int64_t count, int64_t element_size) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  (void)data, (void)count, (void)element_size;
#else
  switch (element_size) {
    case 2:
      swap_bytes<uint16_t>(data, count, bswap16);
      break;
    case 4:
      swap_bytes<uint32_t>(data, count, bswap32);
      break;
    case 8:
      swap_bytes<uint64_t>(data, count, bswap64);
      break;
    default:
      break;
  }
#endif
}

std::string find_file(const std::string& dir, const std::string& stem) {
  for (const std::string& name : {stem + ".gz", stem}) {
    const std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    if (fs::exists(path, ec)) return path;
  }
  throw DataError("MNIST-format folder " + quote_path(dir) + " has neither " + stem + ".gz nor " + stem + "." +
                  install_hint(dir));
}

}  // namespace

at::Tensor read_idx(const std::string& path) {
  GzReader in(path);

  unsigned char magic[4] = {0, 0, 0, 0};
  const int64_t got_magic = in.read(magic, 4);
  if (got_magic == 0) throw DataError("IDX file " + quote_path(path) + " is empty (0 bytes): an interrupted download or copy? Give the complete file.");
  if (got_magic < 4) {
    throw DataError("IDX file " + quote_path(path) + " has a truncated header: expected 4 magic bytes, found " +
                    std::to_string(got_magic) + "." + in.why_short());
  }
  ElementType type{};
  if (magic[0] != 0 || magic[1] != 0 || !element_type(magic[2], &type) || magic[3] == 0) {
    throw DataError("IDX file " + quote_path(path) +
                    " is not an IDX file (plain or gzip-compressed): expected the magic bytes "
                    "00 00 TYPE NDIM with TYPE one of 08 09 0b 0c 0d 0e and NDIM >= 1, found " +
                    hex_bytes(magic, 4) + ".");
  }

  const int ndim = magic[3];
  std::vector<unsigned char> dims(static_cast<size_t>(ndim) * 4);
  const int64_t got_dims = in.read(dims.data(), static_cast<int64_t>(dims.size()));
  if (got_dims < static_cast<int64_t>(dims.size())) {
    throw DataError("IDX file " + quote_path(path) + " has a truncated header: " + std::to_string(ndim) +
                    " dimensions need " + std::to_string(4 + dims.size()) +
                    " header bytes, found " + std::to_string(4 + got_dims) + "." + in.why_short());
  }
  std::vector<int64_t> shape(static_cast<size_t>(ndim));
  for (int d = 0; d < ndim; ++d) {
    const auto dim = static_cast<int32_t>(big_endian_u32(&dims[static_cast<size_t>(d) * 4]));
    if (dim < 0) {
      throw DataError("IDX file " + quote_path(path) + " has a negative size " + std::to_string(dim) +
                      " for dimension " + std::to_string(d) + " in its header.");
    }
    shape[static_cast<size_t>(d)] = dim;
  }
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim != 0 && numel > std::numeric_limits<int64_t>::max() / type.size / dim) {
      throw DataError("IDX file " + quote_path(path) + " announces shape " + shape_string(shape) +
                      ", more bytes than any file holds: its header is corrupt.");
    }
    numel *= dim;
  }

  const int64_t expected = numel * type.size;
  // An uncompressed file says up front whether the data is all there: no need to allocate
  // what a corrupt header announces.
  const int64_t available = in.raw_bytes_left();
  if (available >= 0 && available < expected) {
    throw DataError("IDX file " + quote_path(path) + " is truncated: its header announces shape " +
                    shape_string(shape) + ", i.e. " + std::to_string(expected) +
                    " data bytes, but only " + std::to_string(available) + " follow the header.");
  }
  if (available < 0) {
    const int64_t at_most = in.max_gzip_bytes_left();
    if (at_most >= 0 && at_most < expected) {
      throw DataError("IDX file " + quote_path(path) + " is corrupt or truncated: its header announces shape " +
                      shape_string(shape) + ", i.e. " + std::to_string(expected) +
                      " data bytes, more than its gzip stream can hold (at most " + std::to_string(at_most) +
                      " bytes at deflate's largest ratio).");
    }
  }
  at::Tensor tensor;
  try {
    tensor = at::empty(shape, type.dtype);
  } catch (const c10::Error& e) {
    throw DataError("IDX file " + quote_path(path) + " announces shape " + shape_string(shape) + " (" +
                    std::to_string(expected) + " bytes), which cannot be allocated (" +
                    e.what_without_backtrace() + "): is its header corrupt?");
  }
  const int64_t got = in.read(tensor.data_ptr(), expected);
  if (got < expected) {
    throw DataError("IDX file " + quote_path(path) + " is truncated: its header announces shape " +
                    shape_string(shape) + ", i.e. " + std::to_string(expected) +
                    " data bytes, but only " + std::to_string(got) + " follow the header." +
                    in.why_short());
  }
  char rest[4096];
  int64_t trailing = 0;
  for (int64_t n; (n = in.read(rest, sizeof(rest))) > 0;) trailing += n;
  if (trailing > 0) {
    throw DataError("IDX file " + quote_path(path) + " has " + std::to_string(trailing) +
                    " bytes of trailing garbage after the " + std::to_string(expected) +
                    " data bytes its header (shape " + shape_string(shape) +
                    ") announces: the header or the file is corrupt.");
  }
  big_endian_to_host(tensor.data_ptr(), numel, type.size);
  return tensor;
}

std::shared_ptr<TensorDataset> load_mnist_format(const std::string& dir, bool train, int64_t num_classes) {
  const FileKind kind = file_kind(dir);
  if (kind == FileKind::kMissing) {
    throw DataError("MNIST-format folder " + quote_path(dir) + " does not exist." + install_hint(dir));
  }
  if (kind != FileKind::kDirectory) {
    throw DataError("MNIST-format folder " + quote_path(dir) + " is " +
                    (kind == FileKind::kRegular ? std::string("a file") : describe(kind)) +
                    ", not a folder. Give the folder that holds the IDX files (e.g. " + kFashionMnistDir + ").");
  }
  const std::string split = train ? "train" : "t10k";
  const std::string images_path = find_file(dir, split + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, split + "-labels-idx1-ubyte");
  at::Tensor images = read_idx(images_path);
  at::Tensor labels = read_idx(labels_path);
  if (images.scalar_type() != at::kByte || images.dim() != 3 || images.size(1) != 28 ||
      images.size(2) != 28) {
    throw DataError("IDX file " + quote_path(images_path) +
                    " should hold uint8 images of shape [N, 28, 28], "
                    "found " +
                    std::string(c10::toString(images.scalar_type())) + " " +
                    shape_string(images.sizes().vec()) + ".");
  }
  if (labels.scalar_type() != at::kByte || labels.dim() != 1) {
    throw DataError("IDX file " + quote_path(labels_path) + " should hold uint8 labels of shape [N], found " +
                    std::string(c10::toString(labels.scalar_type())) + " " +
                    shape_string(labels.sizes().vec()) + ".");
  }
  if (images.size(0) != labels.size(0)) {
    throw DataError("MNIST-format folder " + quote_path(dir) + ": " + quote_path(images_path) + " holds " +
                    std::to_string(images.size(0)) + " images but " + quote_path(labels_path) + " holds " +
                    std::to_string(labels.size(0)) +
                    " labels. The two files must come from the same release.");
  }
  if (images.size(0) == 0) {
    throw DataError("MNIST-format folder " + quote_path(dir) + ": " + quote_path(images_path) + " and " +
                    quote_path(labels_path) + " hold 0 images and 0 labels. Give files with data.");
  }
  if (num_classes > 0) {
    const at::Tensor bad = labels.ge(num_classes).nonzero();
    if (bad.numel() > 0) {
      const int64_t index = bad[0][0].item<int64_t>();
      throw DataError("IDX file " + quote_path(labels_path) + " holds label " +
                      std::to_string(static_cast<int>(labels[index].item<uint8_t>())) + " at index " +
                      std::to_string(index) + " (" + std::to_string(bad.size(0)) + " of " +
                      std::to_string(labels.size(0)) + " labels are outside 0.." + std::to_string(num_classes - 1) +
                      "), but the data set has " + std::to_string(num_classes) +
                      " classes. Give labels 0.." + std::to_string(num_classes - 1) + " or set num_classes to match.");
    }
  }
  at::Tensor inputs = images.to(at::kFloat).div_(255.0).unsqueeze(1);
  return std::make_shared<TensorDataset>(std::vector<at::Tensor>{inputs, labels.to(at::kLong)});
}

}  // namespace volt::data
