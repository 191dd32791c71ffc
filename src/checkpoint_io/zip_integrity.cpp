#include "volt/checkpoint_io/zip_integrity.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "volt/core/error.h"
#include "volt/core/file_check.h"

namespace volt::checkpoint_io {

namespace {

#if defined(__x86_64__)
// CRC-32 by carry-less multiplication (Gopal et al., "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ Instruction", Intel, 2009): four 128-bit lanes are folded 512 bits at a time, then into one lane,
// then reduced to 32 bits (Barrett). The constants are the paper's, for the bit-reflected polynomial
// 0xEDB88320. zlib 1.2.13's table-driven CRC runs at ~1.5 GB/s here, which made the check cost more than
// the read; this runs at memory speed. `state` is the CRC register (the inverted CRC); `n` is a multiple of
// 16, at least 64.
#define VOLT_CLMUL __attribute__((target("pclmul,sse4.1")))

VOLT_CLMUL inline __m128i load(const unsigned char* at) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
}

/// acc times x^(k's distance), plus the next 128 bits.
VOLT_CLMUL inline __m128i fold(__m128i acc, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)), next);
}

VOLT_CLMUL uint32_t crc32_clmul(const unsigned char* p, size_t n, uint32_t state) {
  const __m128i by_four = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
  const __m128i by_one = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
  const __m128i to_64 = _mm_set_epi64x(0, 0x163cd6124);
  const __m128i barrett = _mm_set_epi64x(0x1f7011641, 0x1db710641);
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
  __m128i lane[4] = {load(p), load(p + 16), load(p + 32), load(p + 48)};
  lane[0] = _mm_xor_si128(lane[0], _mm_cvtsi32_si128(static_cast<int>(state)));
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    for (int k = 0; k < 4; ++k) lane[k] = fold(lane[k], by_four, load(p + 16 * k));
  }
  __m128i acc = lane[0];
  for (int k = 1; k < 4; ++k) acc = fold(acc, by_one, lane[k]);
  for (; n >= 16; p += 16, n -= 16) acc = fold(acc, by_one, load(p));
  // 128 -> 64 bits.
  acc = _mm_xor_si128(_mm_srli_si128(acc, 8), _mm_clmulepi64_si128(acc, by_one, 0x10));
  acc = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(acc, low32), to_64, 0x00), _mm_srli_si128(acc, 4));
  // 64 -> 32 bits.
  __m128i t = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(acc, low32), barrett, 0x10), low32);
  acc = _mm_xor_si128(acc, _mm_clmulepi64_si128(t, barrett, 0x00));
  return static_cast<uint32_t>(_mm_extract_epi32(acc, 1));
}

bool has_clmul() {
  static const bool has = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return has;
}
#endif

}  // namespace

uint32_t crc32(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
#if defined(__x86_64__)
  if (size >= 64 && has_clmul()) {
    const size_t bulk = size & ~size_t{15};
    crc = ~crc32_clmul(p, bulk, ~crc);
    p += bulk;
    size -= bulk;
  }
#endif
  // crc32_z takes a size_t length; still fed in 1 GiB pieces to stay within any uInt limits.
  while (size > 0) {
    const size_t piece = std::min<size_t>(size, size_t{1} << 30);
    crc = static_cast<uint32_t>(::crc32_z(crc, p, piece));
    p += piece;
    size -= piece;
  }
  return crc;
}

bool looks_like_zip(const unsigned char* bytes, size_t size) {
  // A local header first, an end record first (an empty archive), or an end record last (a damaged start).
  return size >= 4 && (std::memcmp(bytes, "PK\x03\x04", 4) == 0 || std::memcmp(bytes, "PK\x05\x06", 4) == 0 ||
                       (size >= 22 && std::memcmp(bytes + size - 22, "PK\x05\x06", 4) == 0));
}

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kDescriptorSig = 0x08074b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB": PyTorch's alignment padding, filled with 'Z'
constexpr uint16_t kAllowedFlags = 0x0808;    // bit 3: data descriptor follows; bit 11: UTF-8 names
constexpr size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kZip64EndSize = 56, kLocatorSize = 20;

std::string hex(uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

/// Little-endian reads, bounds checked by the callers.
struct Bytes {
  const unsigned char* p;
  size_t n;
  uint16_t u16(size_t at) const { return static_cast<uint16_t>(p[at] | (p[at + 1] << 8)); }
  uint32_t u32(size_t at) const { return u16(at) | (static_cast<uint32_t>(u16(at + 2)) << 16); }
  uint64_t u64(size_t at) const { return u32(at) | (static_cast<uint64_t>(u32(at + 4)) << 32); }
};

/// What a local or central header's extra field says: its Zip64 values (in order) if any.
struct Extra {
  std::vector<uint64_t> zip64;
  bool has_zip64 = false;
};

class Verifier {
 public:
  Verifier(const unsigned char* p, size_t n, std::string what) : b_{p, n}, what_(std::move(what)) {}

  std::vector<ZipRecord> run() {
    if (b_.n < kEndSize) {
      fail("it has " + std::to_string(b_.n) +
           " bytes, fewer than the 22 of a zip end-of-central-directory record "
           "(truncated, or not a zip archive)");
    }
    const size_t end_at = b_.n - kEndSize;
    if (b_.u32(end_at) != kEndSig) {
      // A record further back means bytes were appended (or a comment); none means truncation.
      const size_t lowest = b_.n > 65557 ? b_.n - 65557 : 0;
      for (size_t at = end_at; at-- > lowest;) {
        if (b_.u32(at) == kEndSig) {
          fail("its end-of-central-directory record is at byte " + std::to_string(at) + ", followed by " +
               std::to_string(b_.n - at - kEndSize) +
               " bytes (a zip comment or appended data, which torch.save never writes)");
        }
      }
      fail("it does not end with a zip end-of-central-directory record (truncated, or not a zip archive)");
    }
    const std::string end = "the end-of-central-directory record (at byte " + std::to_string(end_at) + ")";
    if (b_.u16(end_at + 4) != 0 || b_.u16(end_at + 6) != 0) fail(end + " names another disk (a split archive)");
    uint64_t entries = b_.u16(end_at + 10);
    if (b_.u16(end_at + 8) != entries) {
      fail(end + " counts " + std::to_string(b_.u16(end_at + 8)) + " entries on this disk but " +
           std::to_string(entries) + " in all");
    }
    uint64_t cd_size = b_.u32(end_at + 12);
    uint64_t cd_offset = b_.u32(end_at + 16);
    if (b_.u16(end_at + 20) != 0)
      fail(end + " declares a comment of " + std::to_string(b_.u16(end_at + 20)) + " bytes");
    size_t cd_limit = end_at;  // where the central directory must end
    if (end_at >= kLocatorSize && b_.u32(end_at - kLocatorSize) == kZip64LocatorSig) {
      const size_t loc = end_at - kLocatorSize;
      const std::string where = "the Zip64 end-of-central-directory locator (at byte " + std::to_string(loc) + ")";
      if (b_.u32(loc + 4) != 0 || b_.u32(loc + 16) != 1) fail(where + " names another disk (a split archive)");
      const uint64_t z64 = b_.u64(loc + 8);
      if (loc < kZip64EndSize || z64 != loc - kZip64EndSize) {
        fail(where + " points to byte " + std::to_string(z64) + ", but the Zip64 end record it locates must start at " +
             "byte " + std::to_string(loc >= kZip64EndSize ? loc - kZip64EndSize : 0));
      }
      const std::string z = "the Zip64 end-of-central-directory record (at byte " + std::to_string(z64) + ")";
      if (b_.u32(z64) != kZip64EndSig) fail(z + " has no valid signature");
      if (b_.u64(z64 + 4) != kZip64EndSize - 12) {
        fail(z + " declares " + std::to_string(b_.u64(z64 + 4)) + " bytes after its size field, not 44");
      }
      // PyTorch's writer (miniz) writes version made by 0x031e, needed 0x002d.
      if (b_.u16(z64 + 12) != 0x031e || b_.u16(z64 + 14) != 0x002d) {
        fail(z + " has versions " + hex(b_.u16(z64 + 12), 4) + "/" + hex(b_.u16(z64 + 14), 4) +
             ", not the 0x031e/0x002d PyTorch's writer puts there");
      }
      if (b_.u32(z64 + 16) != 0 || b_.u32(z64 + 20) != 0) fail(z + " names another disk (a split archive)");
      const uint64_t z_entries = b_.u64(z64 + 32), z_size = b_.u64(z64 + 40), z_offset = b_.u64(z64 + 48);
      if (b_.u64(z64 + 24) != z_entries) fail(z + " counts different entries on this disk and in all");
      auto agree = [&](uint64_t classic, uint64_t saturated, uint64_t wide, const char* field) {
        if (classic != saturated && classic != wide) {
          fail(z + " gives " + field + " " + std::to_string(wide) + " but " + end + " gives " +
               std::to_string(classic));
        }
      };
      agree(entries, 0xFFFF, z_entries, "the entry count");
      agree(cd_size, 0xFFFFFFFF, z_size, "the central directory's size");
      agree(cd_offset, 0xFFFFFFFF, z_offset, "the central directory's offset");
      entries = z_entries;
      cd_size = z_size;
      cd_offset = z_offset;
      cd_limit = z64;
    } else if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
      fail(end + " defers to a Zip64 record that is not there");
    }
    if (cd_offset > cd_limit || cd_size != cd_limit - cd_offset) {
      fail("the central directory should span bytes " + std::to_string(cd_offset) + " to " +
           std::to_string(cd_offset + cd_size) + ", but the end records start at byte " + std::to_string(cd_limit));
    }
    if (entries > cd_size / kCentralSize) {
      fail("the central directory declares " + std::to_string(entries) + " entries, more than its " +
           std::to_string(cd_size) + " bytes hold");
    }
    return walk(static_cast<size_t>(cd_offset), static_cast<size_t>(cd_limit), entries);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw CheckpointError(what_ + " is damaged: " + why + ". Restore it from a copy or use another checkpoint.");
  }

  /// Checks an extra field (`[at, at + len)`) of a header: only Zip64 and PyTorch's padding blocks.
  Extra extra(size_t at, size_t len, const std::string& where) const {
    Extra out;
    size_t i = 0;
    while (i < len) {
      if (len - i < 4) fail(where + " has an extra field that ends inside a block header");
      const uint16_t id = b_.u16(at + i), size = b_.u16(at + i + 2);
      if (size > len - i - 4)
        fail(where + " has an extra block of " + std::to_string(size) + " bytes that overruns it");
      const size_t data = at + i + 4;
      if (id == kPaddingExtraId) {
        for (size_t k = 0; k < size; ++k) {
          if (b_.p[data + k] != 'Z') {
            fail(where + " has byte " + hex(b_.p[data + k], 2) + " at " + std::to_string(data + k) +
                 " in its alignment padding, which PyTorch fills with 'Z'");
          }
        }
      } else if (id == kZip64ExtraId && !out.has_zip64 && size % 8 == 0) {
        out.has_zip64 = true;
        for (size_t k = 0; k < size; k += 8) out.zip64.push_back(b_.u64(data + k));
      } else {
        fail(where + " has an extra block with id " + hex(id, 4) + " and " + std::to_string(size) +
             " bytes, which PyTorch's writer does not write");
      }
      i += 4 + size;
    }
    return out;
  }

  std::vector<ZipRecord> walk(size_t cd_offset, size_t cd_end, uint64_t entries) const {
    struct Entry {
      ZipRecord record;
      uint16_t need, flags, time, date;
      bool zip64;
      size_t cd_at;
    };
    std::vector<Entry> list;
    std::set<std::string> names;
    size_t at = cd_offset;
    for (uint64_t e = 0; e < entries; ++e) {
      const std::string where =
          "central directory entry " + std::to_string(e) + " (at byte " + std::to_string(at) + ")";
      if (cd_end - at < kCentralSize) fail(where + " runs past the central directory");
      if (b_.u32(at) != kCentralSig) fail(where + " has no valid signature");
      const size_t name_len = b_.u16(at + 28), extra_len = b_.u16(at + 30), comment_len = b_.u16(at + 32);
      if (name_len + extra_len + comment_len > cd_end - at - kCentralSize) {
        fail(where + " declares a name, extra field and comment longer than the central directory holds");
      }
      std::string name(reinterpret_cast<const char*>(b_.p + at + kCentralSize), name_len);
      const std::string rec = "record " + quote_path(name) + " (" + where + ")";
      if (name.empty()) fail(where + " has an empty name");
      if (!names.insert(name).second) fail(rec + " repeats the name of an earlier record");
      const uint16_t made_by = b_.u16(at + 4);
      if (made_by != 0 && made_by != 0x031e && made_by != 0x002d && made_by != 0x032d) {
        fail(rec + " has version-made-by " + hex(made_by, 4) + ", which PyTorch's writer does not write");
      }
      Entry entry{};
      entry.need = b_.u16(at + 6);
      entry.flags = b_.u16(at + 8);
      entry.time = b_.u16(at + 12);
      entry.date = b_.u16(at + 14);
      entry.cd_at = at;
      if (entry.flags & ~kAllowedFlags)
        fail(rec + " has flags " + hex(entry.flags, 4) + " (encryption or others torch.save never sets)");
      if (b_.u16(at + 10) != 0) {
        fail(rec + " is compressed (method " + std::to_string(b_.u16(at + 10)) +
             "); torch.save and Volt store records uncompressed");
      }
      if (comment_len != 0) fail(rec + " has a comment of " + std::to_string(comment_len) + " bytes");
      if (b_.u16(at + 34) != 0) fail(rec + " names disk " + std::to_string(b_.u16(at + 34)) + " (a split archive)");
      if (b_.u16(at + 36) != 0 || b_.u32(at + 38) != 0) {
        fail(rec + " has file attributes " + hex(b_.u16(at + 36), 4) + "/" + hex(b_.u32(at + 38), 8) +
             ", which PyTorch's writer leaves 0");
      }
      uint64_t crc = b_.u32(at + 16), comp = b_.u32(at + 20), uncomp = b_.u32(at + 24), offset = b_.u32(at + 42);
      const Extra x = extra(at + kCentralSize + name_len, extra_len, rec);
      size_t next = 0;
      auto wide = [&](uint64_t& v, const char* field) {
        if (v != 0xFFFFFFFF) return;
        if (next >= x.zip64.size()) fail(rec + " defers its " + field + " to a Zip64 extra field that lacks it");
        v = x.zip64[next++];
      };
      wide(uncomp, "size");
      wide(comp, "compressed size");
      wide(offset, "local header offset");
      if (next != x.zip64.size()) fail(rec + " has a Zip64 extra field with values it does not use");
      if (comp != uncomp) {
        fail(rec + " declares " + std::to_string(comp) + " stored bytes but a size of " + std::to_string(uncomp));
      }
      entry.zip64 = x.has_zip64;
      entry.record = {std::move(name), offset, 0, uncomp, static_cast<uint32_t>(crc)};
      list.push_back(std::move(entry));
      at += kCentralSize + name_len + extra_len + comment_len;
    }
    if (at != cd_end) {
      fail("the central directory's " + std::to_string(entries) + " entries end at byte " + std::to_string(at) +
           ", but it spans to byte " + std::to_string(cd_end));
    }
    std::sort(list.begin(), list.end(),
              [](const Entry& a, const Entry& c) { return a.record.header_offset < c.record.header_offset; });
    uint64_t expected_at = 0;
    std::vector<ZipRecord> out;
    for (auto& entry : list) {
      ZipRecord& r = entry.record;
      const std::string rec = "record " + quote_path(r.name);
      if (r.header_offset != expected_at) {
        fail(rec + " has its local header at byte " + std::to_string(r.header_offset) + ", but the record before " +
             "it ends at byte " + std::to_string(expected_at) + " (records must follow each other without gaps)");
      }
      const size_t h = static_cast<size_t>(r.header_offset);
      const std::string where = rec + " (local header at byte " + std::to_string(h) + ")";
      if (h > cd_offset || cd_offset - h < kLocalSize) fail(where + " runs into the central directory");
      if (b_.u32(h) != kLocalSig) fail(where + " has no valid local header signature");
      auto same = [&](uint64_t local, uint64_t central, const char* field) {
        if (local != central) {
          fail(where + " gives " + field + " " + std::to_string(local) + ", its central directory entry " +
               std::to_string(central));
        }
      };
      same(b_.u16(h + 4), entry.need, "version needed");
      same(b_.u16(h + 6), entry.flags, "flags");
      same(b_.u16(h + 8), 0, "compression method");
      same(b_.u16(h + 10), entry.time, "modification time");
      same(b_.u16(h + 12), entry.date, "modification date");
      const size_t name_len = b_.u16(h + 26), extra_len = b_.u16(h + 28);
      if (name_len + extra_len > cd_offset - h - kLocalSize)
        fail(where + " has a name and extra field that run into the central directory");
      if (name_len != r.name.size() || std::memcmp(b_.p + h + kLocalSize, r.name.data(), name_len) != 0) {
        fail(where + " names itself " +
             quote_path(std::string(reinterpret_cast<const char*>(b_.p + h + kLocalSize), name_len)) +
             " but its central directory entry names it " + quote_path(r.name));
      }
      const Extra x = extra(h + kLocalSize + name_len, extra_len, where);
      const bool descriptor = entry.flags & 0x0008;
      // With a data descriptor PyTorch's writer leaves the local header's CRC and sizes 0 (the
      // descriptor after the data holds them), so any other value there is damage, even one that
      // happens to equal the entry's; without one they are the entry's (or Zip64's 0xFFFFFFFF).
      auto local_value = [&](uint64_t local, uint64_t central, size_t zip64_index, const char* field) {
        if (descriptor && local == 0) return;
        const bool from_zip64 = local == 0xFFFFFFFF && x.has_zip64 && zip64_index < x.zip64.size();
        if (from_zip64) local = x.zip64[zip64_index];
        if (local == central && (!descriptor || from_zip64)) return;
        fail(where + " gives " + field + " " + std::to_string(local) + ", its central directory entry " +
             std::to_string(central) + (descriptor ? " (with a data descriptor following, PyTorch writes 0 here)" : ""));
      };
      local_value(b_.u32(h + 14), r.crc, 99, "CRC-32");
      local_value(b_.u32(h + 22), r.size, 0, "size");
      local_value(b_.u32(h + 18), r.size, 1, "compressed size");
      r.data_offset = h + kLocalSize + name_len + extra_len;
      if (r.size > cd_offset - r.data_offset) {
        fail(where + " declares " + std::to_string(r.size) + " bytes, but only " +
             std::to_string(cd_offset - r.data_offset) + " lie before the central directory (truncated?)");
      }
      size_t end = static_cast<size_t>(r.data_offset + r.size);
      if (descriptor) {
        const bool wide_sizes = entry.zip64 || x.has_zip64;
        const size_t len = wide_sizes ? 24 : 16;
        const std::string dwhere = rec + " (data descriptor at byte " + std::to_string(end) + ")";
        if (cd_offset - end < len) fail(dwhere + " runs into the central directory");
        if (b_.u32(end) != kDescriptorSig) fail(dwhere + " has no valid signature");
        const uint64_t dcomp = wide_sizes ? b_.u64(end + 8) : b_.u32(end + 8);
        const uint64_t dsize = wide_sizes ? b_.u64(end + 16) : b_.u32(end + 12);
        if (b_.u32(end + 4) != r.crc || dcomp != r.size || dsize != r.size) {
          fail(dwhere + " gives CRC-32 " + hex(b_.u32(end + 4), 8) + " and sizes " + std::to_string(dcomp) + "/" +
               std::to_string(dsize) + ", its central directory entry " + hex(r.crc, 8) + " and " +
               std::to_string(r.size));
        }
        end += len;
      }
      const uint32_t actual = crc32(b_.p + r.data_offset, static_cast<size_t>(r.size));
      if (actual != r.crc) {
        fail(rec + " (" + std::to_string(r.size) + " bytes at byte " + std::to_string(r.data_offset) + ") has CRC-32 " +
             hex(actual, 8) + " but the archive records " + hex(r.crc, 8) + ": its bytes changed after it was written");
      }
      expected_at = end;
      out.push_back(std::move(r));
    }
    if (expected_at != cd_offset) {
      fail("the last record ends at byte " + std::to_string(expected_at) +
           ", but the central directory starts at byte " + std::to_string(cd_offset));
    }
    return out;
  }

  Bytes b_;
  std::string what_;
};

}  // namespace

std::vector<ZipRecord> verify_zip(const unsigned char* bytes, size_t size, const std::string& what) {
  return Verifier(bytes, size, what).run();
}

MappedFile::MappedFile(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw CheckpointError(what + " cannot be opened: " + std::strerror(errno) + ".");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw CheckpointError(what + " is not a regular file.");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    // Read in at once (MAP_POPULATE: one call instead of a page fault per 4 KiB), then made writable:
    // a tensor that points into the mapping may be changed in place (copy on write); the file never is.
    // (Populating a writable private mapping would copy every page.)
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED && ::mprotect(p, size_, PROT_READ | PROT_WRITE) != 0) {
      const int err = errno;
      ::munmap(p, size_);
      ::close(fd);
      throw CheckpointError(what + " cannot be mapped into memory: " + std::strerror(err) + ".");
    }
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw CheckpointError(what + " cannot be mapped into memory: " + std::strerror(err) + ".");
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace volt::checkpoint_io
