// A Trainer stage that fails under torchrun writes torchrun's error file, so that torchrun's
// failure summary names Volt's error instead of `error_file: <N/A>`.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/boring_module.h"
#include "volt/core/error.h"
#include "volt/trainer/trainer.h"

namespace {

using volt::testing::BoringModule;
using volt::testing::quiet_options;
using volt::testing::random_loader;
using volt::testing::ScratchDir;

/// Sets one variable for the test's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* key, const std::string& value) : key_(key) { ::setenv(key, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(key_); }

 private:
  const char* key_;
};

class FailsAtStepTwo : public BoringModule {
 public:
  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    if (train_steps == 2) throw volt::DataError("batch 2 holds a label of 11; the classes are 0-9 (test)");
    return BoringModule::training_step(batch, ctx);
  }
};

TEST(TorchelasticErrorFile, FailingFitWritesTheErrorForTorchrun) {
  ScratchDir dir;
  const std::string path = dir.path() + "/error.json";
  ScopedEnv env("TORCHELASTIC_ERROR_FILE", path);
  volt::Trainer trainer(quiet_options(dir.path()));
  FailsAtStepTwo model;
  EXPECT_THROW(trainer.fit(model, random_loader(64, 8, 1)), volt::DataError);
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " was not written";
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["message"]["message"], "DataError: batch 2 holds a label of 11; the classes are 0-9 (test)");
  const std::string stack = j["message"]["extraInfo"]["py_callstack"];
  EXPECT_NE(stack.find("Trainer stage fit on global rank 0"), std::string::npos) << stack;
}

TEST(TorchelasticErrorFile, SuccessfulStagesWriteNothing) {
  ScratchDir dir;
  const std::string path = dir.path() + "/error.json";
  ScopedEnv env("TORCHELASTIC_ERROR_FILE", path);
  volt::Trainer trainer(quiet_options(dir.path()));
  BoringModule model;
  trainer.fit(model, random_loader(32, 8, 1));
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
