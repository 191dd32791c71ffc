// volt_fuzz_replay TARGET FILE...: runs one fuzz target's harness once on each file, in the main build
// (g++, against libvolt), as libFuzzer does with files given as arguments. A harness aborts on a crash;
// ctest (tests/fuzz/replay.cmake) replays the committed corpus and every regression input this way.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"

int volt_fuzz_cli(const uint8_t* data, size_t size);
int volt_fuzz_checkpoint(const uint8_t* data, size_t size);
int volt_fuzz_safetensors(const uint8_t* data, size_t size);
int volt_fuzz_idx(const uint8_t* data, size_t size);
int volt_fuzz_csv(const uint8_t* data, size_t size);
int volt_fuzz_token_file(const uint8_t* data, size_t size);
int volt_fuzz_generator_options(const uint8_t* data, size_t size);
int volt_fuzz_ui_api(const uint8_t* data, size_t size);
int volt_fuzz_image(const uint8_t* data, size_t size);

namespace {

struct Target {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};

constexpr Target kTargets[] = {
    {"cli", volt_fuzz_cli},
    {"checkpoint", volt_fuzz_checkpoint},
    {"safetensors", volt_fuzz_safetensors},
    {"idx", volt_fuzz_idx},
    {"csv", volt_fuzz_csv},
    {"token_file", volt_fuzz_token_file},
    {"generator_options", volt_fuzz_generator_options},
    {"ui_api", volt_fuzz_ui_api},
    {"image", volt_fuzz_image},
};

}  // namespace

int main(int argc, char** argv) {
  std::string names;
  for (const auto& t : kTargets) names += std::string(names.empty() ? "" : ", ") + t.name;
  if (argc < 3) {
    std::fprintf(stderr, "usage: volt_fuzz_replay TARGET FILE...  (targets: %s)\n", names.c_str());
    return 2;
  }
  const Target* target = nullptr;
  for (const auto& t : kTargets) {
    if (std::strcmp(t.name, argv[1]) == 0) target = &t;
  }
  if (target == nullptr) {
    std::fprintf(stderr, "volt_fuzz_replay: unknown target '%s' (targets: %s)\n", argv[1], names.c_str());
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "volt_fuzz_replay: cannot open '%s'\n", argv[i]);
      return 2;
    }
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", argv[i], bytes.size());
    target->run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("volt_fuzz_replay %s: %d inputs, no crash\n", target->name, argc - 2);
  return 0;
}
