// .safetensors files: round trips of every dtype, module save/load, strict validation
// of malformed files, and an independent reader/writer in Python (numpy) as a check that
// the bytes follow the format and not merely Volt's own reading of it.
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include "support/temp_dir.h"
#include "volt/checkpoint_io/safetensors.h"
#include "volt/core/error.h"
#include "volt/core/printable.h"
#include "support/source_dir.h"

namespace {

namespace fs = std::filesystem;
using volt::CheckpointError;
using volt::checkpoint_io::load_module_safetensors;
using volt::checkpoint_io::load_safetensors;
using volt::checkpoint_io::save_module_safetensors;
using volt::checkpoint_io::save_safetensors;

using volt::testing::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out;
}

/// A file as written by hand: length prefix, header text as given (no padding), data.
std::string raw_file(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

/// One tensor of every dtype the format supports, with values that exercise sign and range.
std::map<std::string, at::Tensor> every_dtype() {
  std::map<std::string, at::Tensor> t;
  t["f32"] = at::randn({2, 3});
  t["f64"] = at::randn({4}, at::kDouble);
  t["f16"] = at::randn({3, 2}).to(at::kHalf);
  t["bf16"] = at::randn({5}).to(at::kBFloat16);
  t["i64"] = at::randint(-(int64_t{1} << 40), int64_t{1} << 40, {6}, at::kLong);
  t["i32"] = at::randint(-100000, 100000, {2, 2}, at::kInt);
  t["i16"] = at::randint(-30000, 30000, {3}, at::kShort);
  t["i8"] = at::randint(-128, 128, {7}, at::kChar);
  t["u8"] = at::randint(0, 256, {8}, at::kByte);
  t["bool"] = at::randint(0, 2, {9}, at::kLong).to(at::kBool);
  return t;
}

/// A non-contiguous view, a 0-d tensor and an empty tensor.
std::map<std::string, at::Tensor> odd_shapes() {
  std::map<std::string, at::Tensor> t;
  t["view"] = at::arange(24, at::kFloat).reshape({4, 6}).t().slice(1, 0, 4, 2);
  t["scalar"] = at::scalar_tensor(3.25, at::kDouble);
  t["empty"] = at::empty({0, 3});
  return t;
}

void expect_same_tensors(const std::map<std::string, at::Tensor>& want, const std::map<std::string, at::Tensor>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    EXPECT_EQ(it->second.scalar_type(), w.scalar_type()) << name;
    EXPECT_EQ(it->second.sizes(), w.sizes()) << name;
    EXPECT_TRUE(it->second.is_contiguous()) << name;
    EXPECT_TRUE(at::equal(it->second, w.contiguous())) << name;
  }
}

TEST(Safetensors, RoundTripsEveryDtype) {
  TempDir dir;
  const auto tensors = every_dtype();
  save_safetensors(tensors, dir.file("all.safetensors"));
  expect_same_tensors(tensors, load_safetensors(dir.file("all.safetensors")).tensors);
}

TEST(Safetensors, RoundTripsNonContiguousViewScalarAndEmptyTensor) {
  TempDir dir;
  const auto tensors = odd_shapes();
  ASSERT_FALSE(tensors.at("view").is_contiguous());
  save_safetensors(tensors, dir.file("odd.safetensors"));
  const auto loaded = load_safetensors(dir.file("odd.safetensors")).tensors;
  expect_same_tensors(tensors, loaded);
  EXPECT_EQ(loaded.at("scalar").dim(), 0);
  EXPECT_EQ(loaded.at("empty").numel(), 0);
}

TEST(Safetensors, RoundTripsMetadata) {
  TempDir dir;
  const std::map<std::string, std::string> metadata{{"format", "pt"}, {"epoch", "3"}, {"note", "ünïcode ✓"}};
  save_safetensors({{"w", at::randn({2})}}, dir.file("m.safetensors"), metadata);
  EXPECT_EQ(load_safetensors(dir.file("m.safetensors")).metadata, metadata);
  save_safetensors({{"w", at::randn({2})}}, dir.file("none.safetensors"));
  EXPECT_TRUE(load_safetensors(dir.file("none.safetensors")).metadata.empty());
}

TEST(Safetensors, HeaderIsPaddedToMultipleOfEightAndOffsetsAreContiguousInNameOrder) {
  TempDir dir;
  auto tensors = every_dtype();
  for (auto& [name, t] : odd_shapes()) tensors[name] = t;
  save_safetensors(tensors, dir.file("layout.safetensors"), {{"k", "v"}});
  const std::string bytes = read_bytes(dir.file("layout.safetensors"));
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  ASSERT_LE(8 + n, bytes.size());
  const std::string text = bytes.substr(8, n);
  EXPECT_EQ(text.front(), '{');
  EXPECT_EQ(text.find_last_not_of(' '), text.rfind('}')) << "only spaces may follow the JSON object";
  const auto header = nlohmann::json::parse(text);
  EXPECT_EQ(header.at("__metadata__"), (nlohmann::json{{"k", "v"}}));
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted names
    const auto& info = header.at(name);
    EXPECT_EQ(info.at("data_offsets")[0].get<uint64_t>(), offset) << name;
    offset = info.at("data_offsets")[1].get<uint64_t>();
    EXPECT_EQ(info.at("shape").get<std::vector<int64_t>>(), t.sizes().vec()) << name;
  }
  EXPECT_EQ(offset, bytes.size() - 8 - n);
  EXPECT_EQ(header.at("bf16").at("dtype"), "BF16");
  EXPECT_EQ(header.at("bool").at("dtype"), "BOOL");
}

TEST(Safetensors, SaveLeavesNoTemporaryFilesBehind) {
  TempDir dir;
  save_safetensors({{"w", at::randn({3})}}, dir.file("w.safetensors"));
  save_safetensors({{"w", at::randn({4})}}, dir.file("w.safetensors"));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"w.safetensors"});
  EXPECT_EQ(load_safetensors(dir.file("w.safetensors")).tensors.at("w").numel(), 4);
}

TEST(Safetensors, SaveRejectsUnsupportedDtypeNamingTensorAndDtype) {
  TempDir dir;
  const std::string path = dir.file("c.safetensors");
  try {
    save_safetensors({{"ok", at::randn({2})}, {"spectrum", at::randn({2}).to(at::kComplexFloat)}}, path);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("'spectrum'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ComplexFloat"), std::string::npos) << msg;
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(Safetensors, SaveRejectsReservedMetadataName) {
  TempDir dir;
  EXPECT_THROW(save_safetensors({{"__metadata__", at::randn({2})}}, dir.file("r.safetensors")), CheckpointError);
}

// --- modules ---

struct Leaf : torch::nn::Module {
  explicit Leaf(int64_t n) {
    weight = register_parameter("weight", at::randn({n, 2}));
    bias = register_parameter("bias", at::randn({n}));
    running = register_buffer("running", at::randn({n}));
  }
  at::Tensor weight, bias, running;
};

struct TinyNet : torch::nn::Module {
  explicit TinyNet(int64_t n = 3) {
    first = register_module("first", std::make_shared<Leaf>(n));
    scale = register_parameter("scale", at::randn({1}));
    steps = register_buffer("steps", at::randint(0, 100, {}, at::kLong));
  }
  std::shared_ptr<Leaf> first;
  at::Tensor scale, steps;
};

std::map<std::string, at::Tensor> state_of(const torch::nn::Module& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : m.named_parameters(true)) out[item.key()] = item.value().detach().clone();
  for (const auto& item : m.named_buffers(true)) out[item.key()] = item.value().detach().clone();
  return out;
}

TEST(SafetensorsModule, LoadIntoFreshModuleGivesEqualParametersAndBuffers) {
  TempDir dir;
  TinyNet saved;
  save_module_safetensors(saved, dir.file("net.safetensors"), {{"model", "TinyNet"}});
  const auto file = load_safetensors(dir.file("net.safetensors"));
  EXPECT_EQ(file.metadata.at("model"), "TinyNet");
  std::vector<std::string> names;
  for (const auto& [name, t] : file.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"first.bias", "first.running", "first.weight", "scale", "steps"}));

  TinyNet fresh;
  load_module_safetensors(fresh, dir.file("net.safetensors"));
  expect_same_tensors(state_of(saved), state_of(fresh));
  EXPECT_TRUE(fresh.first->weight.requires_grad());
  EXPECT_TRUE(fresh.scale.requires_grad());
}

TEST(SafetensorsModule, LoadConvertsToEachParametersDtype) {
  TempDir dir;
  TinyNet source;
  auto state = state_of(source);
  for (auto& [name, t] : state) {
    if (t.is_floating_point()) t = t.to(at::kDouble);
  }
  state["steps"] = state["steps"].to(at::kInt);
  save_safetensors(state, dir.file("f64.safetensors"));
  TinyNet target;
  load_module_safetensors(target, dir.file("f64.safetensors"));
  EXPECT_EQ(target.first->weight.scalar_type(), at::kFloat);
  EXPECT_EQ(target.steps.scalar_type(), at::kLong);
  expect_same_tensors(state_of(source), state_of(target));
}

TEST(SafetensorsModule, StrictLoadListsMissingUnexpectedAndMismatchedNamesAndCopiesNothing) {
  TempDir dir;
  const std::string path = dir.file("wrong.safetensors");
  save_safetensors({{"first.weight", at::randn({3, 2})},
                    {"first.bias", at::randn({4})},
                    {"head.weight", at::randn({2, 2})},
                    {"scale", at::randn({1})}},
                   path);
  TinyNet net;
  const auto before = state_of(net);
  try {
    load_module_safetensors(net, path);
    FAIL() << "expected CheckpointError";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing in file [first.running, steps]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("shape differs [first.bias (file [4], module [3])]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected in file [head.weight]"), std::string::npos) << msg;
  }
  expect_same_tensors(before, state_of(net));
}

// --- malformed files ---

class SafetensorsMalformed : public ::testing::Test {
 protected:
  /// Writes `bytes` and expects load_safetensors to throw a CheckpointError that names
  /// the file and contains `phrase`.
  void expect_rejected(const std::string& bytes, const std::string& phrase) {
    const std::string path = dir_.file("bad.safetensors");
    write_bytes(path, bytes);
    expect_error(path, phrase);
  }
  void expect_error(const std::string& path, const std::string& phrase) {
    try {
      load_safetensors(path);
      ADD_FAILURE() << "expected CheckpointError containing '" << phrase << "'";
    } catch (const CheckpointError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + path + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(phrase), std::string::npos) << msg;
    }
  }
  TempDir dir_;
};

const std::string kFourBytes(4, '\0');

TEST_F(SafetensorsMalformed, MissingFile) {
  expect_error(dir_.file("nope.safetensors"), "cannot be opened");
}

TEST_F(SafetensorsMalformed, ShorterThanEightBytes) {
  expect_rejected(std::string("\x10\x00\x00", 3), "3 bytes long, shorter than the 8-byte header length");
}

TEST_F(SafetensorsMalformed, EmptyFile) {
  expect_rejected("", "0 bytes long");
}

TEST_F(SafetensorsMalformed, HeaderLengthLargerThanFile) {
  expect_rejected(le64(1000) + "{}", "declares a 1000-byte header but only 2 bytes follow");
}

TEST_F(SafetensorsMalformed, HeaderLengthOverflowing) {
  expect_rejected(le64(~uint64_t{0}) + "{}", "-byte header but only 2 bytes follow");
}

TEST_F(SafetensorsMalformed, HeaderNotJson) {
  expect_rejected(raw_file("{\"a\": {\"dtype\""), "not valid JSON");
}

TEST_F(SafetensorsMalformed, HeaderNotUtf8) {
  expect_rejected(raw_file("{\"\xff\xfe\": 1}"), "not valid JSON");
}

TEST_F(SafetensorsMalformed, HeaderNotUtf8IsReportedInValidUtf8WithTheBytesEscaped) {
  try {
    load_safetensors([&] {
      const std::string path = dir_.file("bad.safetensors");
      write_bytes(path, raw_file("{\"\xff\xfe\": 1}"));
      return path;
    }());
    ADD_FAILURE() << "expected a CheckpointError";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(volt::is_valid_utf8(msg)) << msg;
    EXPECT_NE(msg.find("\\xff"), std::string::npos) << msg;
    // A JSON writer (volt inspect --json) can carry it.
    EXPECT_NO_THROW(nlohmann::json({{"error", msg}}).dump());
  }
}

TEST_F(SafetensorsMalformed, DuplicateTensorEntryIsRefused) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                           R"( "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                           kFourBytes),
                  "has the entry 'a' twice in its header");
}

TEST_F(SafetensorsMalformed, DuplicateKeyInsideAnEntryIsRefused) {
  expect_rejected(
      raw_file(R"({"a": {"dtype": "F64", "dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", kFourBytes),
      "has the key 'dtype' twice in the entry 'a'");
}

TEST_F(SafetensorsMalformed, DuplicateMetadataKeyIsRefused) {
  expect_rejected(raw_file(R"({"__metadata__": {"epoch": "1", "epoch": "2"}})"),
                  "has the key 'epoch' twice in the entry '__metadata__'");
}

TEST_F(SafetensorsMalformed, DeeplyNestedHeaderIsRefused) {
  expect_rejected(raw_file("{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}"),
                  "nested deeper than 16 levels");
}

TEST_F(SafetensorsMalformed, EqualKeysInDifferentEntriesAreFine) {
  const std::string path = dir_.file("two.safetensors");
  write_bytes(path, raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                             R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                             std::string(8, '\0')));
  EXPECT_EQ(load_safetensors(path).tensors.size(), 2u);
}

TEST_F(SafetensorsMalformed, FolderIsRefusedAsAFolder) {
  const std::string path = dir_.file("weights.safetensors");
  fs::create_directory(path);
  expect_error(path, "is a folder, not a regular file");
}

TEST_F(SafetensorsMalformed, FifoIsRefusedWithoutBlocking) {
  const std::string path = dir_.file("pipe.safetensors");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // Opening a FIFO for reading blocks until a writer comes; the loader must not open it.
  expect_error(path, "is a FIFO (named pipe), not a regular file");
}

TEST_F(SafetensorsMalformed, HeaderNotObject) {
  expect_rejected(raw_file("[1, 2]"), "is a JSON array, not an object");
}

TEST_F(SafetensorsMalformed, UnknownDtype) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})", "x"),
                  "tensor 'a' with unknown dtype 'F8_E4M3'");
}

TEST_F(SafetensorsMalformed, MissingDataOffsets) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F32", "shape": [1]}})", kFourBytes),
                  "tensor 'a' without 'data_offsets'");
}

TEST_F(SafetensorsMalformed, NegativeShape) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", kFourBytes),
                  "tensor 'a' without a 'shape' list of non-negative integers");
}

TEST_F(SafetensorsMalformed, ShapeDoesNotMatchOffsets) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", kFourBytes),
                  "tensor 'a' of shape [2] and dtype F32 (8 bytes) but data_offsets [0, 4] span 4 bytes");
}

TEST_F(SafetensorsMalformed, HugeShapeDoesNotOverflow) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})"),
                  "(too large)");
}

TEST_F(SafetensorsMalformed, OffsetsOutOfRange) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", kFourBytes),
                  "tensor 'a' with data_offsets [0, 8] beyond the end of the data section (4 bytes)");
}

TEST_F(SafetensorsMalformed, OverlappingOffsets) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                           R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                           std::string(8, '\0')),
                  "overlapping tensors: 'a' [0, 8] and 'b' [4, 8]");
}

TEST_F(SafetensorsMalformed, GapBetweenTensors) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                           R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                           std::string(12, '\0')),
                  "gap of 4 unused bytes between tensor 'a' and tensor 'b'");
}

TEST_F(SafetensorsMalformed, GapBeforeFirstTensor) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", std::string(8, '\0')),
                  "gap of 4 unused bytes before tensor 'a'");
}

TEST_F(SafetensorsMalformed, TrailingBytes) {
  expect_rejected(raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", std::string(6, '\0')),
                  "2 trailing bytes after the last tensor");
}

TEST_F(SafetensorsMalformed, MetadataNotStrings) {
  expect_rejected(raw_file(R"({"__metadata__": {"epoch": 3}})"), "metadata 'epoch' that is a JSON number");
}

TEST_F(SafetensorsMalformed, ValidHandWrittenFileLoads) {
  // The control for the cases above: the same hand-made layout, correct, loads.
  const std::string path = dir_.file("good.safetensors");
  const float values[2] = {1.5f, -2.0f};
  write_bytes(path, raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                             std::string(reinterpret_cast<const char*>(values), sizeof(values))));
  const auto a = load_safetensors(path).tensors.at("a");
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(a[0].item<float>(), 1.5f);
  EXPECT_EQ(a[1].item<float>(), -2.0f);
}

// --- an independent reader and writer (Python standard library + numpy) ---

int run_command(const std::string& command) {
  const int status = std::system(command.c_str());
  return (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string python_skip_reason() {
  if (::access("/usr/bin/python3", X_OK) != 0) return "/usr/bin/python3 is not installed";
  if (run_command("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    return "numpy is not importable by /usr/bin/python3 (apt install python3-numpy)";
  }
  return "";
}

std::string check_script() {
  const fs::path dir = volt::testing::source_dir() / "tests" / "checkpoint_io";
  return (dir / "safetensors_check.py").string();
}

nlohmann::json values_of(const at::Tensor& t) {
  const at::Tensor flat = t.contiguous().reshape({-1});
  if (t.is_floating_point()) {
    const at::Tensor d = flat.to(at::kDouble);
    return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  }
  const at::Tensor l = flat.to(at::kLong);
  return std::vector<int64_t>(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
}

TEST(SafetensorsPython, IndependentReaderSeesTheValuesVoltWrote) {
  const std::string skip = python_skip_reason();
  if (!skip.empty()) GTEST_SKIP() << skip;
  TempDir dir;
  auto tensors = every_dtype();
  for (auto& [name, t] : odd_shapes()) tensors[name] = t;
  const std::map<std::string, std::string> metadata{{"from", "volt"}, {"epoch", "7"}};
  save_safetensors(tensors, dir.file("volt.safetensors"), metadata);
  nlohmann::json expect{{"metadata", metadata}, {"tensors", nlohmann::json::object()}};
  for (const auto& [name, t] : tensors) {
    expect["tensors"][name] = {{"dtype", volt::checkpoint_io::safetensors_dtype_name(t.scalar_type())},
                               {"shape", t.sizes().vec()},
                               {"values", values_of(t)}};
  }
  std::ofstream(dir.file("expect.json")) << expect.dump();
  const std::string command = "/usr/bin/python3 " + shell_quote(check_script()) + " check " +
                              shell_quote(dir.file("volt.safetensors")) + " " + shell_quote(dir.file("expect.json"));
  EXPECT_EQ(run_command(command), 0) << command;

  // The reader is not vacuous: a wrong expectation fails it.
  expect["tensors"]["i64"]["values"][0] = expect["tensors"]["i64"]["values"][0].get<int64_t>() + 1;
  std::ofstream(dir.file("wrong.json")) << expect.dump();
  EXPECT_EQ(run_command("/usr/bin/python3 " + shell_quote(check_script()) + " check " +
                        shell_quote(dir.file("volt.safetensors")) + " " + shell_quote(dir.file("wrong.json")) +
                        " 2>/dev/null"),
            1);
}

TEST(SafetensorsPython, VoltLoadsTheFilePythonWrote) {
  const std::string skip = python_skip_reason();
  if (!skip.empty()) GTEST_SKIP() << skip;
  TempDir dir;
  const std::string path = dir.file("python.safetensors");
  const std::string command = "/usr/bin/python3 " + shell_quote(check_script()) + " write " + shell_quote(path);
  ASSERT_EQ(run_command(command), 0) << command;
  const auto file = load_safetensors(path);
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"from", "python"}}));
  ASSERT_EQ(file.tensors.size(), 2u);
  const at::Tensor a = file.tensors.at("a");
  const at::Tensor b = file.tensors.at("b");
  EXPECT_EQ(a.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(a, at::arange(6, at::kFloat).reshape({2, 3})));
  EXPECT_EQ(b.scalar_type(), at::kLong);
  EXPECT_TRUE(at::equal(b, at::arange(10, 14, at::kLong)));
}

}  // namespace
