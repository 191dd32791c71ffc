#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "volt/precision/precision.h"

namespace volt::precision {

/// The precision names Volt knows (Lightning 2.x's), with what each means.
struct PrecisionSpec {
  std::string name;
  std::string description;
};

const std::vector<PrecisionSpec>& precision_specs();

/// One spelling for each precision: "32-true", "64-true", "16-mixed", "bf16-mixed",
/// "16-true", "bf16-true". Legacy 32/64 are accepted silently; 16 and "bf16" too, with a
/// deprecation warning added to `warnings`. Anything else: ConfigError listing the names.
std::string normalize_precision(const std::string& given, std::vector<std::string>* warnings = nullptr);

/// Builds the plug-in for an accelerator ("cpu", "cuda", "tpu").
using PrecisionFactory = std::function<std::shared_ptr<Precision>(const std::string& accelerator)>;
/// The plug-in behind a normalised name, or nullptr when this build has none.
PrecisionFactory precision_factory(const std::string& name);
void register_precision_factory(const std::string& name, PrecisionFactory factory);

}  // namespace volt::precision
