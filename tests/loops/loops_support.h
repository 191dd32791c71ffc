// Shared by the loop tests (tests/loops/*_test.cpp): the headers they use, the names they
// take from volt and the test support, and keys_of.
#pragma once

#include <gtest/gtest.h>

#include "support/expect.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/tensor.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/boring_module.h"
#include "volt/callbacks/early_stopping.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/core/error.h"
#include "volt/core/lr_scheduler.h"
#include "volt/core/seed.h"
#include "volt/trainer/trainer.h"

namespace {


using volt::Batch;
using volt::ConfigError;
using volt::LogOptions;
using volt::MetricMap;
using volt::StepContext;
using volt::Trainer;
using volt::TrainerView;
using volt::testing::BoringModule;
using volt::testing::quiet_options;
using volt::testing::random_dataset;
using volt::testing::random_loader;
using volt::testing::ScratchDir;
using volt::testing::ValidationSpy;

using volt::testing::contains;

[[maybe_unused]] std::set<std::string> keys_of(const MetricMap& m) {
  std::set<std::string> out;
  for (const auto& [k, v] : m) out.insert(k);
  return out;
}

}  // namespace
