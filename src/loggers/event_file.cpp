#include "volt/loggers/event_file.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "loggers/detail/protobuf.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"

namespace volt::loggers {
namespace {

std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

uint32_t load_le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  unsigned char header[8];
  const uint64_t n = payload.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  out.append(reinterpret_cast<const char*>(header), 8);
  auto put32 = [&out](uint32_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put32(masked_crc32c(header, 8));
  out += payload;
  put32(masked_crc32c(payload.data(), payload.size()));
  return out;
}

namespace detail {

bool parse_fields(const std::string& message, std::vector<ProtoField>& fields, std::string& error) {
  size_t pos = 0;
  const size_t n = message.size();
  auto read_varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= n) return false;
      const auto byte = static_cast<unsigned char>(message[pos++]);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  };
  while (pos < n) {
    const size_t at = pos;
    uint64_t key = 0;
    if (!read_varint(key)) {
      error = "a field key at byte " + std::to_string(at) + " is cut or too long";
      return false;
    }
    ProtoField f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.type = static_cast<WireType>(key & 7);
    switch (f.type) {
      case kVarint:
        if (!read_varint(f.varint)) {
          error = "the varint of field " + std::to_string(f.number) + " at byte " + std::to_string(at) + " is cut";
          return false;
        }
        break;
      case kFixed64:
      case kFixed32: {
        const size_t width = f.type == kFixed64 ? 8 : 4;
        if (n - pos < width) {
          error = "field " + std::to_string(f.number) + " at byte " + std::to_string(at) + " is cut";
          return false;
        }
        for (size_t i = 0; i < width; ++i) {
          f.varint |= static_cast<uint64_t>(static_cast<unsigned char>(message[pos + i])) << (8 * i);
        }
        pos += width;
        break;
      }
      case kLengthDelimited: {
        uint64_t len = 0;
        if (!read_varint(len) || len > n - pos) {
          error = "the length of field " + std::to_string(f.number) + " at byte " + std::to_string(at) +
                  " runs past the end of its message";
          return false;
        }
        f.bytes = message.substr(pos, len);
        pos += len;
        break;
      }
      default:
        error = "field " + std::to_string(f.number) + " at byte " + std::to_string(at) + " has wire type " +
                std::to_string(key & 7) + ", which event files do not use";
        return false;
    }
    fields.push_back(std::move(f));
  }
  return true;
}

}  // namespace detail

namespace {

using detail::ProtoField;

[[noreturn]] void damaged(const std::string& path, uint64_t offset, const std::string& why) {
  throw Error("event file " + quote_path(path) + " is damaged at byte " + std::to_string(offset) + ": " + why +
              ". A file cut by a crash ends at its last whole record; copy the file without its tail, or delete it.");
}

std::vector<ProtoField> fields_of(const std::string& message, const std::string& path, uint64_t offset,
                                  const char* what) {
  std::vector<ProtoField> fields;
  std::string error;
  if (!detail::parse_fields(message, fields, error)) damaged(path, offset, std::string(what) + ": " + error);
  return fields;
}

SummaryValue decode_value(const std::string& bytes, const std::string& path, uint64_t offset) {
  SummaryValue v;
  for (const auto& f : fields_of(bytes, path, offset, "a Summary.Value")) {
    switch (f.number) {
      case 1:
        v.tag = f.bytes;
        break;
      case 2:
        v.kind = SummaryValue::Kind::kScalar;
        v.scalar = f.as_float();
        break;
      case 4:
        v.kind = SummaryValue::Kind::kImage;
        for (const auto& g : fields_of(f.bytes, path, offset, "a Summary.Image")) {
          if (g.number == 1) v.image.height = static_cast<int64_t>(g.varint);
          if (g.number == 2) v.image.width = static_cast<int64_t>(g.varint);
          if (g.number == 3) v.image.colorspace = static_cast<int64_t>(g.varint);
          if (g.number == 4) v.image.encoded = g.bytes;
        }
        break;
      case 5: {
        v.kind = SummaryValue::Kind::kHistogram;
        auto& h = v.histogram;
        for (const auto& g : fields_of(f.bytes, path, offset, "a HistogramProto")) {
          if (g.number >= 1 && g.number <= 5 && g.type == detail::kFixed64) {
            double* slot[] = {&h.min, &h.max, &h.num, &h.sum, &h.sum_squares};
            *slot[g.number - 1] = g.as_double();
          } else if ((g.number == 6 || g.number == 7) && g.type == detail::kLengthDelimited) {
            if (g.bytes.size() % 8 != 0)
              damaged(path, offset, "a packed double field has a length not a multiple of 8");
            auto& out = g.number == 6 ? h.bucket_limit : h.bucket;
            for (size_t i = 0; i < g.bytes.size(); i += 8) {
              uint64_t bits = 0;
              for (int k = 0; k < 8; ++k)
                bits |= static_cast<uint64_t>(static_cast<unsigned char>(g.bytes[i + k])) << (8 * k);
              double d;
              std::memcpy(&d, &bits, 8);
              out.push_back(d);
            }
          }
        }
        break;
      }
      case 8:
        v.kind = SummaryValue::Kind::kTensor;
        for (const auto& g : fields_of(f.bytes, path, offset, "a TensorProto")) {
          if (g.number == 8) v.tensor_strings.push_back(g.bytes);
        }
        break;
      case 9:
        for (const auto& g : fields_of(f.bytes, path, offset, "a SummaryMetadata")) {
          if (g.number != 1) continue;
          for (const auto& p : fields_of(g.bytes, path, offset, "a PluginData")) {
            if (p.number == 1) v.plugin_name = p.bytes;
            if (p.number == 2) v.plugin_content = p.bytes;
          }
        }
        break;
      default:
        break;
    }
  }
  return v;
}

EventRecord decode_event(const std::string& bytes, const std::string& path, uint64_t offset) {
  EventRecord e;
  for (const auto& f : fields_of(bytes, path, offset, "an Event")) {
    if (f.number == 1 && f.type == detail::kFixed64) e.wall_time = f.as_double();
    if (f.number == 2 && f.type == detail::kVarint) e.step = static_cast<int64_t>(f.varint);
    if (f.number == 3 && f.type == detail::kLengthDelimited) e.file_version = f.bytes;
    if (f.number == 5 && f.type == detail::kLengthDelimited) {
      for (const auto& g : fields_of(f.bytes, path, offset, "a Summary")) {
        if (g.number == 1) e.values.push_back(decode_value(g.bytes, path, offset));
      }
    }
  }
  return e;
}

}  // namespace

std::vector<EventRecord> read_events(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw Error("event file " + quote_path(path) +
                " is not a regular file. Give the path of an events.out.tfevents.* file.");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open the event file " + quote_path(path) + ": " + std::strerror(errno) + ".");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string data = buffer.str();
  std::vector<EventRecord> events;
  uint64_t pos = 0;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  while (pos < data.size()) {
    if (data.size() - pos < 12) damaged(path, pos, "the file ends inside a record's header");
    uint64_t len = 0;
    for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(bytes[pos + i]) << (8 * i);
    const uint32_t stored = load_le32(bytes + pos + 8);
    const uint32_t computed = masked_crc32c(bytes + pos, 8);
    if (stored != computed) {
      damaged(path, pos,
              "the CRC of the record's length does not match (stored " + hex32(stored) + ", computed " +
                  hex32(computed) + ")");
    }
    if (len > data.size() - pos - 12 || data.size() - pos - 12 - len < 4) {
      damaged(path, pos, "the record announces " + std::to_string(len) + " bytes, more than the file holds");
    }
    const std::string payload = data.substr(pos + 12, len);
    const uint32_t stored_data = load_le32(bytes + pos + 12 + len);
    const uint32_t computed_data = masked_crc32c(payload.data(), payload.size());
    if (stored_data != computed_data) {
      damaged(path, pos,
              "the CRC of the record's data does not match (stored " + hex32(stored_data) + ", computed " +
                  hex32(computed_data) + ")");
    }
    events.push_back(decode_event(payload, path, pos));
    pos += 12 + len + 4;
  }
  return events;
}

std::vector<ScalarPoint> read_event_scalars(const std::string& path) {
  std::vector<ScalarPoint> points;
  for (const auto& e : read_events(path)) {
    for (const auto& v : e.values) {
      if (v.kind == SummaryValue::Kind::kScalar) points.push_back({v.tag, e.step, e.wall_time, v.scalar});
    }
  }
  return points;
}

}  // namespace volt::loggers
