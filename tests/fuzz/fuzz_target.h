// Shared by the fuzz targets of tests/fuzz: one harness per reader, built two ways.
// - Under libFuzzer (build-fuzz/, clang-14, -DVOLT_FUZZ_LIBFUZZER): VOLT_FUZZ_TARGET defines
//   LLVMFuzzerTestOneInput, and sanitizers watch the Volt sources compiled into the target.
// - In the main build: it defines volt_fuzz_<name>, which volt_fuzz_replay runs on the committed
//   corpus and regression inputs (ctest label hostile), against libvolt itself.
// The contract every harness checks: bad input ends in the reader's own error type (volt::Error,
// GeneratorError for the generator, a 4xx answer for the page's API); anything else (another
// exception, a broken invariant) is a crash, reported with the input's size and the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#ifdef VOLT_FUZZ_LIBFUZZER
#define VOLT_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#else
#define VOLT_FUZZ_TARGET(name) int volt_fuzz_##name(const uint8_t* data, size_t size)
#endif

namespace volt::fuzz {

/// Prints "volt fuzz <target>: <what>" to stderr and aborts: libFuzzer saves the input as a crash,
/// the replay binary dies with SIGABRT (ctest reports it).
[[noreturn]] void crash(const char* target, const std::string& what);

/// crash() for an exception of a type the reader must not let out: names its dynamic type.
[[noreturn]] void crash_on_exception(const char* target, const std::exception& e);

/// A path inside this process's scratch folder (created on first use under $TMPDIR or /tmp,
/// removed at exit); the same name gives the same path.
std::string scratch_path(const std::string& name);

/// Writes the bytes to `path` (truncating); crash() when that fails, as that is the harness's fault.
void write_file(const std::string& path, const uint8_t* data, size_t size);

/// Splits the input at NUL bytes (at most `max_parts`; the last part keeps the rest).
std::vector<std::string> split_nul(const uint8_t* data, size_t size, size_t max_parts);

}  // namespace volt::fuzz
