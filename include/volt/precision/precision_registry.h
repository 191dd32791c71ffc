#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "volt/core/registry.h"
#include "volt/precision/precision.h"

namespace volt::precision {

/// A precision name and what it means.
struct PrecisionSpec {
  std::string name;
  std::string description;
};

/// Every precision name registered: Lightning 2.x's first, then those a program added.
std::vector<PrecisionSpec> precision_specs();

/// One spelling for each precision: "32-true", "64-true", "16-mixed", "bf16-mixed",
/// "16-true", "bf16-true" or a registered name. Legacy 32/64 are accepted silently; 16 and
/// "bf16" too, with a deprecation warning added to `warnings`. Anything else: ConfigError
/// listing the names.
std::string normalize_precision(const std::string& given, std::vector<std::string>* warnings = nullptr);

/// The Trainer's `precision` option. A factory builds the plug-in for the device family of
/// the accelerator ("cpu", "cuda", "tpu"). The legacy spellings 16, 32, 64 and "bf16" are
/// reserved.
using PrecisionRegistry = Registry<Precision, const std::string&>;
using PrecisionFactory = PrecisionRegistry::Factory;

/// The registry, with Volt's plug-ins on first use.
PrecisionRegistry& precision_registry();
/// Adds Volt's precision plug-ins to `registry` (what precision_registry() calls once).
void register_builtin_precisions(PrecisionRegistry& registry);

/// Adds (or replaces) a precision name:
///
///     volt::precision::register_precision("fp8-sim", "float8 simulated in float32",
///         [](const std::string& device_type) { return std::make_shared<Fp8Sim>(); });
void register_precision(const std::string& name, std::string description, PrecisionFactory factory);

/// The plug-in behind a name (any spelling normalize_precision accepts), or an empty
/// function when this build has none.
PrecisionFactory precision_factory(const std::string& name);
/// Replaces the plug-in behind a known name, keeping its description.
void register_precision_factory(const std::string& name, PrecisionFactory factory);

}  // namespace volt::precision
