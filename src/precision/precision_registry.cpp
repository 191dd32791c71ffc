#include "volt/precision/precision_registry.h"

#include <mutex>

#include "volt/core/error.h"
#include "volt/precision/mixed_precision.h"
#include "volt/precision/true_precision.h"

namespace volt::precision {

namespace {

c10::DeviceType autocast_device(const std::string& accelerator, const std::string& precision) {
  if (accelerator == "cpu") return c10::DeviceType::CPU;
  if (accelerator == "cuda") return c10::DeviceType::CUDA;
  throw NotSupportedError("precision='" + precision +
                          "' needs LibTorch's autocast, which runs on cpu and cuda; the "
                          "accelerator is " +
                          accelerator + ".");
}

}  // namespace

void register_builtin_precisions(PrecisionRegistry& r) {
  using P = std::shared_ptr<Precision>;
  r.add("32-true", "float32 parameters and computation",
        [](const std::string&) -> P { return std::make_shared<Precision>(); });
  r.add("64-true", "float64 parameters, inputs and computation",
        [](const std::string&) -> P { return std::make_shared<TruePrecision>("64-true", at::kDouble); });
  r.add("16-mixed", "float32 parameters, float16 autocast regions, dynamic loss scaling (CUDA)",
        [](const std::string& accelerator) -> P {
          return std::make_shared<MixedPrecision>("16-mixed", autocast_device(accelerator, "16-mixed"), at::kHalf,
                                                  std::make_shared<GradScaler>());
        });
  r.add("bf16-mixed", "float32 parameters, bfloat16 autocast regions", [](const std::string& accelerator) -> P {
    return std::make_shared<MixedPrecision>("bf16-mixed", autocast_device(accelerator, "bf16-mixed"), at::kBFloat16);
  });
  r.add("16-true", "float16 parameters and inputs",
        [](const std::string&) -> P { return std::make_shared<TruePrecision>("16-true", at::kHalf); });
  r.add("bf16-true", "bfloat16 parameters and inputs",
        [](const std::string&) -> P { return std::make_shared<TruePrecision>("bf16-true", at::kBFloat16); });
}

PrecisionRegistry& precision_registry() {
  static PrecisionRegistry registry("precision", {"16", "32", "64", "bf16"});
  static std::once_flag built_in;
  std::call_once(built_in, [] { register_builtin_precisions(registry); });
  return registry;
}

std::vector<PrecisionSpec> precision_specs() {
  std::vector<PrecisionSpec> out;
  for (const auto& e : precision_registry().entries()) out.push_back({e.key, e.description});
  return out;
}

std::string normalize_precision(const std::string& given, std::vector<std::string>* warnings) {
  const std::string key = registry_key(given);  // "BF16-mixed" is "bf16-mixed"
  if (key == "32") return "32-true";
  if (key == "64") return "64-true";
  if (key == "16" || key == "bf16") {
    const std::string to = key == "16" ? "16-mixed" : "bf16-mixed";
    if (warnings) {
      warnings->push_back("precision=" + given + " is a legacy spelling; it means precision=\"" + to +
                          "\". Write that to keep the meaning when the old form goes away.");
    }
    return to;
  }
  if (precision_registry().contains(key)) return key;
  std::string known;
  for (const auto& s : precision_specs()) known += (known.empty() ? "" : ", ") + s.name;
  throw ConfigError("precision='" + given + "' is not known. Valid values: " + known +
                    " (and the legacy 32, 64, 16, \"bf16\").");
}

void register_precision(const std::string& name, std::string description, PrecisionFactory factory) {
  precision_registry().add(name, std::move(description), std::move(factory));
}

PrecisionFactory precision_factory(const std::string& name) {
  const std::string key = registry_key(name);
  if (!precision_registry().contains(key)) return PrecisionFactory();
  return precision_registry().entry(key).factory;
}

void register_precision_factory(const std::string& name, PrecisionFactory factory) {
  precision_registry().set_factory(normalize_precision(name), std::move(factory));
}

}  // namespace volt::precision
