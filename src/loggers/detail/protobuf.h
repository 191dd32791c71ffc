#pragma once
// The protocol-buffer wire format, the part TensorBoard's event files use: varints,
// 64- and 32-bit fixed fields and length-delimited fields (strings, bytes, messages,
// packed repeated doubles). Written by hand: no generated code, no libprotobuf.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace volt::loggers::detail {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

/// Appends fields to a message.
class ProtoWriter {
 public:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  void key(uint32_t field, WireType type) { varint((static_cast<uint64_t>(field) << 3) | type); }
  /// int32, int64, enum, bool: negative values take ten bytes (two's complement), as protobuf does.
  void int_field(uint32_t field, int64_t v) {
    key(field, kVarint);
    varint(static_cast<uint64_t>(v));
  }
  void double_field(uint32_t field, double v) {
    key(field, kFixed64);
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    fixed(bits, 8);
  }
  void float_field(uint32_t field, float v) {
    key(field, kFixed32);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    fixed(bits, 4);
  }
  void bytes_field(uint32_t field, const std::string& bytes) {
    key(field, kLengthDelimited);
    varint(bytes.size());
    out_ += bytes;
  }
  void message_field(uint32_t field, const ProtoWriter& message) { bytes_field(field, message.str()); }
  void packed_doubles(uint32_t field, const std::vector<double>& values) {
    key(field, kLengthDelimited);
    varint(values.size() * 8);
    for (double v : values) {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      fixed(bits, 8);
    }
  }
  const std::string& str() const { return out_; }

 private:
  void fixed(uint64_t bits, int bytes) {
    for (int i = 0; i < bytes; ++i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  std::string out_;
};

/// One field read from a message.
struct ProtoField {
  uint32_t number = 0;
  WireType type = kVarint;
  uint64_t varint = 0;  // kVarint; the bits of kFixed64 and kFixed32
  std::string bytes;    // kLengthDelimited
  double as_double() const {
    double d;
    std::memcpy(&d, &varint, 8);
    return d;
  }
  float as_float() const {
    const uint32_t bits = static_cast<uint32_t>(varint);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

/// Splits a message into its fields; returns false on malformed input (`error` says why).
bool parse_fields(const std::string& message, std::vector<ProtoField>& fields, std::string& error);

}  // namespace volt::loggers::detail
