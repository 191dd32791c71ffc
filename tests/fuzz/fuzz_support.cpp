#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <cxxabi.h>

#include "fuzz_target.h"

namespace volt::fuzz {
namespace {

std::string g_scratch;

void remove_scratch() {
  std::error_code ec;
  if (!g_scratch.empty()) std::filesystem::remove_all(g_scratch, ec);
}

std::string demangled(const char* name) {
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && text ? text : name;
  std::free(text);
  return out;
}

}  // namespace

void crash(const char* target, const std::string& what) {
  std::fprintf(stderr, "volt fuzz %s: %s\n", target, what.c_str());
  std::fflush(stderr);
  std::abort();
}

void crash_on_exception(const char* target, const std::exception& e) {
  crash(target, "an exception of type " + demangled(typeid(e).name()) +
                    " escaped (the contract: every bad input is the reader's own error): " + e.what());
}

std::string scratch_path(const std::string& name) {
  if (g_scratch.empty()) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/volt-fuzz.XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) crash("support", "cannot create a scratch folder from " + pattern);
    g_scratch = buf.data();
    std::atexit(remove_scratch);
  }
  return g_scratch + "/" + name;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) crash("support", "cannot write the input to " + path);
}

std::vector<std::string> split_nul(const uint8_t* data, size_t size, size_t max_parts) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < max_parts) {
      parts.emplace_back();
    } else {
      parts.back().push_back(static_cast<char>(data[i]));
    }
  }
  return parts;
}

}  // namespace volt::fuzz
