// The built-in communication hooks on two ranks in one process: two Gloo process groups over a
// FileStore, each driven from its own thread, so that the test decides when each rank joins a
// collective.
#include <gtest/gtest.h>

#if __has_include(<gloo/algorithm.h>)
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <filesystem>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "volt/core/compat.h"
#include "volt/strategies/comm_hooks.h"

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> gloo_group(const std::string& store_path, int rank) {
  auto store = c10::make_intrusive<c10d::FileStore>(store_path, 2);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  options->threads = 1;  // as Volt's ddp makes it
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, 2, options);
#if VOLT_TORCH_VERSION_AT_LEAST(2, 0)
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(store, rank, 2);
  pg->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  return pg;
#else
  return gloo;
#endif
}

/// One rank's bucket of an 8 x 8 weight (compressed at rank 1) and an 8-element bias (not), every
/// gradient element `value`.
struct RankBucket {
  at::Tensor weight = at::zeros({8, 8}), bias = at::zeros({8});
  at::Tensor buffer;
  std::vector<c10::IntArrayRef> sizes;
  std::unique_ptr<c10d::GradBucket> bucket;
  explicit RankBucket(double value) : buffer(at::full({72}, value)) {
    sizes = {weight.sizes(), bias.sizes()};
    bucket = std::make_unique<c10d::GradBucket>(0, 1, buffer, std::vector<size_t>{0, 64}, std::vector<size_t>{64, 8},
                                                sizes, std::vector<at::Tensor>{weight, bias}
#if VOLT_TORCH_VERSION_AT_LEAST(2, 0)
                                                ,
                                                std::nullopt
#endif
    );
  }
};

TEST(PowerSGDHook, ItsCallbacksOwnNoReferenceToTheProcessGroup) {
  // A callback that owned the group could be the last owner, destroyed on the group's own worker
  // thread after the strategy let the group go: ~ProcessGroupGloo joined that thread from itself
  // and a rank died of SIGABRT ("Resource deadlock avoided") at the end of about one fit in ten
  // whose last bucket had no matrix to compress (bench/ddp_scaling, 2026-12-05).
  const std::string store = (std::filesystem::temp_directory_path() /
                             ("volt_comm_hooks_test_" + std::to_string(::getpid()))).string();
  std::filesystem::remove(store);
  std::vector<c10::intrusive_ptr<c10d::ProcessGroup>> pg(2);
  {
    std::thread other([&] { pg[1] = gloo_group(store, 1); });
    pg[0] = gloo_group(store, 0);
    other.join();
  }
  volt::strategies::PowerSGDOptions o;
  o.start_powerSGD_iter = 0;
  std::vector<std::shared_ptr<volt::strategies::CommHook>> hooks;
  std::vector<std::unique_ptr<RankBucket>> buckets;
  for (int r = 0; r < 2; ++r) {
    buckets.push_back(std::make_unique<RankBucket>(r + 1.0));
    hooks.push_back(volt::strategies::make_comm_hook("powersgd", o));
    hooks.back()->setup(pg[r], {buckets[r]->weight, buckets[r]->bias});
  }
  const auto owners = pg[0].use_count();
  // Rank 1 has not joined: rank 0's [bias | P] allreduce waits, its callback pending.
  auto done0 = hooks[0]->run_hook(*buckets[0]->bucket);
  EXPECT_FALSE(done0->completed());
  EXPECT_EQ(pg[0].use_count(), owners) << "a pending PowerSGD callback owns the process group";
  auto done1 = hooks[1]->run_hook(*buckets[1]->bucket);
  done0->wait();
  done1->wait();
  // The bias is averaged exactly; the weight, rank 1 like both ranks' gradients, comes back whole.
  for (const auto& b : buckets) {
    EXPECT_TRUE(at::allclose(b->buffer, at::full({72}, 1.5), 1e-5, 1e-5)) << b->buffer;
  }
  pg.clear();
  std::filesystem::remove(store);
}

}  // namespace
#endif
