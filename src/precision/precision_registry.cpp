#include "volt/precision/precision_registry.h"

#include <map>
#include <mutex>

#include "volt/core/error.h"
#include "volt/core/registry.h"
#include "volt/precision/mixed_precision.h"
#include "volt/precision/true_precision.h"

namespace volt::precision {

const std::vector<PrecisionSpec>& precision_specs() {
  static const std::vector<PrecisionSpec> specs = {
      {"32-true", "float32 parameters and computation"},
      {"64-true", "float64 parameters, inputs and computation"},
      {"16-mixed", "float32 parameters, float16 autocast regions, dynamic loss scaling (CUDA)"},
      {"bf16-mixed", "float32 parameters, bfloat16 autocast regions"},
      {"16-true", "float16 parameters and inputs"},
      {"bf16-true", "bfloat16 parameters and inputs"},
  };
  return specs;
}

std::string normalize_precision(const std::string& given, std::vector<std::string>* warnings) {
  const std::string key = registry_key(given);  // "BF16-mixed" is "bf16-mixed"
  if (key == "32" || key == "32-true") return "32-true";
  if (key == "64" || key == "64-true") return "64-true";
  if (key == "16" || key == "bf16") {
    const std::string to = key == "16" ? "16-mixed" : "bf16-mixed";
    if (warnings) {
      warnings->push_back("precision=" + given + " is a legacy spelling; it means precision=\"" + to +
                          "\". Write that to keep the meaning when the old form goes away.");
    }
    return to;
  }
  for (const auto& s : precision_specs()) {
    if (s.name == key) return s.name;
  }
  std::string known;
  for (const auto& s : precision_specs()) known += (known.empty() ? "" : ", ") + s.name;
  throw ConfigError("precision='" + given + "' is not known. Valid values: " + known +
                    " (and the legacy 32, 64, 16, \"bf16\").");
}

namespace {

c10::DeviceType autocast_device(const std::string& accelerator, const std::string& precision) {
  if (accelerator == "cpu") return c10::DeviceType::CPU;
  if (accelerator == "cuda") return c10::DeviceType::CUDA;
  throw NotSupportedError("precision='" + precision + "' needs LibTorch's autocast, which runs on cpu and cuda; the "
                          "accelerator is " + accelerator + ".");
}

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, PrecisionFactory>& factories() {
  static std::map<std::string, PrecisionFactory> f = {
      {"32-true", [](const std::string&) { return std::make_shared<Precision>(); }},
      {"64-true", [](const std::string&) { return std::make_shared<TruePrecision>("64-true", at::kDouble); }},
      {"16-true", [](const std::string&) { return std::make_shared<TruePrecision>("16-true", at::kHalf); }},
      {"bf16-true", [](const std::string&) { return std::make_shared<TruePrecision>("bf16-true", at::kBFloat16); }},
      {"bf16-mixed",
       [](const std::string& accelerator) -> std::shared_ptr<Precision> {
         return std::make_shared<MixedPrecision>("bf16-mixed", autocast_device(accelerator, "bf16-mixed"),
                                                 at::kBFloat16);
       }},
      {"16-mixed",
       [](const std::string& accelerator) -> std::shared_ptr<Precision> {
         return std::make_shared<MixedPrecision>("16-mixed", autocast_device(accelerator, "16-mixed"), at::kHalf,
                                                 std::make_shared<GradScaler>());
       }},
  };
  return f;
}

}  // namespace

PrecisionFactory precision_factory(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex());
  auto it = factories().find(registry_key(name));
  return it == factories().end() ? PrecisionFactory() : it->second;
}

void register_precision_factory(const std::string& name, PrecisionFactory factory) {
  const std::string key = normalize_precision(name);  // only known names, in their canonical form
  std::lock_guard<std::mutex> lock(mutex());
  factories()[key] = std::move(factory);
}

}  // namespace volt::precision
