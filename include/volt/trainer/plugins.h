#pragma once
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "volt/accelerators/accelerator.h"
#include "volt/checkpoint_io/checkpoint_io.h"
#include "volt/connectors/accelerator_connector.h"
#include "volt/environments/cluster_environment.h"
#include "volt/precision/precision.h"
#include "volt/strategies/strategy.h"

namespace volt {

/// One entry of the Trainer's `plugins` (Lightning's plugins=[...]): a ClusterEnvironment, a
/// Precision or a CheckpointIO object, of Volt's classes or the user's own.
///
///     volt::TrainerPlugins plugins{.plugins = {std::make_shared<MyEnvironment>(), my_checkpoint_io}};
class Plugin {
 public:
  /// Any shared_ptr to a ClusterEnvironment, Precision or CheckpointIO (or a class derived
  /// from one). A null pointer is refused when the Trainer is built.
  template <typename T>
  Plugin(std::shared_ptr<T> object) {  // NOLINT(google-explicit-constructor): a list element
    static_assert(std::is_base_of_v<environments::ClusterEnvironment, T> ||
                      std::is_base_of_v<precision::Precision, T> || std::is_base_of_v<checkpoint_io::CheckpointIO, T>,
                  "a Trainer plug-in is a ClusterEnvironment, a Precision or a CheckpointIO; pass a strategy as "
                  "TrainerPlugins::strategy and an accelerator as TrainerPlugins::accelerator");
    if constexpr (std::is_base_of_v<environments::ClusterEnvironment, T>) {
      environment_ = object;
      kind_ = "ClusterEnvironment";
    } else if constexpr (std::is_base_of_v<precision::Precision, T>) {
      precision_ = object;
      kind_ = "Precision";
    } else {
      checkpoint_io_ = object;
      kind_ = "CheckpointIO";
    }
    null_ = object == nullptr;
  }

  const std::shared_ptr<environments::ClusterEnvironment>& environment() const { return environment_; }
  const std::shared_ptr<precision::Precision>& precision() const { return precision_; }
  const std::shared_ptr<checkpoint_io::CheckpointIO>& checkpoint_io() const { return checkpoint_io_; }
  /// "ClusterEnvironment", "Precision" or "CheckpointIO".
  const char* kind() const { return kind_; }
  bool is_null() const { return null_; }

 private:
  std::shared_ptr<environments::ClusterEnvironment> environment_;
  std::shared_ptr<precision::Precision> precision_;
  std::shared_ptr<checkpoint_io::CheckpointIO> checkpoint_io_;
  const char* kind_ = "";
  bool null_ = true;
};

/// The plug-in objects a Trainer takes instead of option names, as Lightning's Trainer takes
/// accelerator=<object>, strategy=<object> and plugins=[...]. A part the objects do not
/// give comes from the options, and a strategy object gets the accelerator, precision,
/// environment and checkpoint IO it was not built with from the accelerator connector.
/// Conflicting choices (strategy="ddp" and a strategy object, precision="16-mixed" and a
/// Precision, two ClusterEnvironments, cluster_environment="slurm" and an environment, a
/// CheckpointIO here and another in the strategy object, ...) are refused when the Trainer
/// is built, naming both.
///
///     volt::strategies::DDPOptions ddp;
///     ddp.bucket_cap_mb = 50;
///     volt::Trainer trainer(options, {.strategy = std::make_shared<volt::strategies::DDPStrategy>(ddp),
///                                     .plugins = {std::make_shared<MyCheckpointIO>()}});
struct TrainerPlugins {
  /// Used instead of the `strategy` option (which must stay "auto").
  std::shared_ptr<strategies::Strategy> strategy;
  /// Used instead of the `accelerator` option (which must stay "auto").
  std::shared_ptr<accelerators::Accelerator> accelerator;
  /// ClusterEnvironment, Precision and CheckpointIO objects, at most one of each kind.
  std::vector<Plugin> plugins;

  /// The objects sorted by kind, as the accelerator connector takes them. ConfigError for a
  /// null entry.
  connectors::PluginObjects sorted() const;
};

/// One registered name: its kind ("accelerator", "strategy", "precision",
/// "cluster_environment", "checkpoint_io", "logger", "profiler"), key and one-line description.
struct RegistryRow {
  std::string kind;
  std::string key;
  std::string description;
};

/// Every registry's entries, kind by kind in the order above, each in its registry's order
/// (registration order; environments in detection order). What `volt info` lists.
std::vector<RegistryRow> registry_rows();
/// registry_rows() as text: a heading per kind, then "  key: description" lines
/// ("[plan only]" marks a key this build cannot construct).
std::string describe_registries();

}  // namespace volt
