// Multi-process tests: they run tests/distributed/dist_program.cpp as real ranks (ddp's
// subprocess launcher, ddp_spawn, `volt launch`) and check results, failures and clean-up.
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "support/expect.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string output;
  double seconds = 0;
};

/// Runs `command` through sh with stderr merged into stdout.
Outcome run(const std::string& command) {
  Outcome r;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = ::popen(("exec 2>&1; " + command).c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

const std::string kProgram = VOLT_DIST_PROGRAM;
const std::string kVolt = VOLT_CLI;

/// A fresh output prefix, unique to this test (also a marker to find leftover processes).
std::string out_prefix(const std::string& name) {
  const std::string dir = (fs::temp_directory_path() / ("volt_dist_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  return dir + "/" + name;
}

struct Result {
  std::map<std::string, std::string> fields;
  std::vector<double> params;
  /// Floating-point buffers (batch-norm statistics), when the program writes them.
  std::vector<double> buffers;
};

Result read_result(const std::string& path) {
  Result r;
  std::ifstream in(path);
  std::string key;
  while (in >> key) {
    std::string value;
    if (key == "metric") {
      std::string name;
      in >> name >> value;
      r.fields["metric " + name] = value;
    } else {
      in >> value;
      if (key == "p") {
        r.params.push_back(std::strtod(value.c_str(), nullptr));
      } else if (key == "b") {
        r.buffers.push_back(std::strtod(value.c_str(), nullptr));
      } else {
        r.fields[key] = value;
      }
    }
  }
  return r;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

/// Processes whose command line contains `marker` (other than this one).
std::vector<std::string> processes_with(const std::string& marker) {
  std::vector<std::string> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = ::readdir(proc)) {
    const std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::stoi(pid) == ::getpid()) continue;
    std::ifstream in("/proc/" + pid + "/cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto& c : cmd) {
      if (c == '\0') c = ' ';
    }
    if (cmd.find(marker) != std::string::npos && cmd.find("sh -c") == std::string::npos) {
      found.push_back(pid + ": " + cmd);
    }
  }
  ::closedir(proc);
  return found;
}

std::string train(const std::string& out, const std::string& extra) {
  return kProgram + " --out " + out + " " + extra;
}

}  // namespace

/// The same training as 2 ddp ranks with `rank_batch` each and as 1 process with twice the
/// batch: {rank 0, rank 1, the one process}.
std::vector<Result> ddp_and_one_process(const std::string& name, int batch, const std::string& extra,
                                        const std::string& ddp_only = "") {
  const std::string ddp = out_prefix(name + "_ddp"), one = out_prefix(name + "_one");
  const Outcome a = run(train(ddp, "--strategy ddp --devices 2 --batch " + std::to_string(batch) + " " + extra + " " +
                                       ddp_only));
  EXPECT_EQ(a.code, 0) << a.output;
  const Outcome b =
      run(train(one, "--strategy single_device --devices 1 --batch " + std::to_string(2 * batch) + " " + extra));
  EXPECT_EQ(b.code, 0) << b.output;
  return {read_result(ddp + ".rank0"), read_result(ddp + ".rank1"), read_result(one + ".rank0")};
}

TEST(DDPStrategy, TwoRanksMatchOneProcessWithTwiceTheBatch) {
  const auto r = ddp_and_one_process("equiv", 8, "--steps 20 --check-start-reduce 1");
  EXPECT_EQ(r[0].fields.at("world_size"), "2");
  EXPECT_EQ(r[0].fields.at("global_step"), "20");
  // Reductions started and read later (ranks give 1 and 2; one process gives its own 1).
  for (const auto& [k, two, one] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"start_reduce_mean", "1.5", "1"}, {"start_reduce_max", "2", "1"}, {"start_reduce_sum", "3", "1"},
           {"reduce_min_between", "1", "1"}, {"reduce_after_dropped", "3", "1"}}) {
    EXPECT_EQ(r[0].fields.at(k), two) << k;
    EXPECT_EQ(r[1].fields.at(k), two) << k;
    EXPECT_EQ(r[2].fields.at(k), one) << k;
  }
  ASSERT_FALSE(r[0].params.empty());
  EXPECT_EQ(r[0].params, r[1].params) << "the two ranks must end bitwise identical";
  EXPECT_LE(max_abs_diff(r[0].params, r[2].params), 1e-5);
}

TEST(DDPStrategy, GradientAccumulationMatchesOneProcessAndSkipsSyncInsideTheWindow) {
  const auto r = ddp_and_one_process("accum", 8, "--steps 20 --accumulate 2", "--check-no-sync 1");
  EXPECT_EQ(r[0].params, r[1].params);
  EXPECT_LE(max_abs_diff(r[0].params, r[2].params), 1e-5);
  // no_sync: after the first micro-batch each rank holds only its own gradient; after the
  // second (synchronising) backward they agree exactly.
  EXPECT_GT(std::stod(r[0].fields.at("unsynced_grad_diff")), 1e-3);
  EXPECT_EQ(std::stod(r[0].fields.at("synced_grad_diff")), 0.0);
}

// StochasticWeightAveraging under ddp: the same average on both ranks, and the batch-norm
// statistics of the final pass (each rank on its half of the data) averaged across them.
TEST(DDPStrategy, StochasticWeightAveragingEndsWithTheSameWeightsAndStatisticsOnBothRanks) {
  const std::string swa = out_prefix("swa"), plain = out_prefix("swa_ref");
  const std::string run_args = "--strategy ddp --devices 2 --steps -1 --epochs 3 --samples 256 --batchnorm 1";
  const Outcome a = run(train(swa, run_args + " --swa 2"));
  ASSERT_EQ(a.code, 0) << a.output;
  const Outcome b = run(train(plain, run_args));
  ASSERT_EQ(b.code, 0) << b.output;
  const Result r0 = read_result(swa + ".rank0"), r1 = read_result(swa + ".rank1"), ref = read_result(plain + ".rank0");
  ASSERT_FALSE(r0.params.empty());
  ASSERT_FALSE(r0.buffers.empty());
  EXPECT_EQ(r0.params, r1.params);
  EXPECT_EQ(r0.buffers, r1.buffers) << "the batch-norm statistics must be averaged across the ranks";
  EXPECT_GT(max_abs_diff(r0.params, ref.params), 1e-6) << "the average must differ from the last weights";
  EXPECT_NE(read_result(plain + ".rank0").buffers, read_result(plain + ".rank1").buffers)
      << "without SWA each rank keeps the statistics of its own data (the check above can fail)";
}

TEST(DDPStrategy, EmaWeightAveragingEndsWithTheSameAverageOnBothRanks) {
  const std::string ema = out_prefix("ema"), plain = out_prefix("ema_ref");
  const Outcome a = run(train(ema, "--strategy ddp --devices 2 --steps 30 --ema 0.8"));
  ASSERT_EQ(a.code, 0) << a.output;
  const Outcome b = run(train(plain, "--strategy ddp --devices 2 --steps 30"));
  ASSERT_EQ(b.code, 0) << b.output;
  const Result r0 = read_result(ema + ".rank0"), r1 = read_result(ema + ".rank1"), ref = read_result(plain + ".rank0");
  ASSERT_FALSE(r0.params.empty());
  EXPECT_EQ(r0.params, r1.params);
  EXPECT_GT(max_abs_diff(r0.params, ref.params), 1e-6) << "the average must differ from the last weights";
}

// Training extras under ddp (docs/training-extras.md): the decisions agree across ranks.
TEST(DDPStrategy, GradientAccumulationSchedulerChangesTheStepsPerEpochOnEveryRankAsInOneProcess) {
  // 640 samples, 8 per rank: 40 batches an epoch; factor 1, then 2: 40 + 20 steps.
  const auto r = ddp_and_one_process("accum_schedule", 8, "--steps -1 --epochs 2 --accum-schedule 0:1,1:2");
  EXPECT_EQ(r[0].fields.at("global_step"), "60");
  EXPECT_EQ(r[1].fields.at("global_step"), "60");
  EXPECT_EQ(r[2].fields.at("global_step"), "60");
  EXPECT_EQ(r[0].params, r[1].params);
  EXPECT_LE(max_abs_diff(r[0].params, r[2].params), 1e-5);
}

TEST(DDPStrategy, GradientAccumulationSchedulerSkipsSyncInsideTheWindow) {
  const auto r = ddp_and_one_process("accum_schedule_sync", 8, "--steps 20 --accum-schedule 0:2", "--check-no-sync 1");
  EXPECT_EQ(r[0].params, r[1].params);
  EXPECT_LE(max_abs_diff(r[0].params, r[2].params), 1e-5);
  EXPECT_GT(std::stod(r[0].fields.at("unsynced_grad_diff")), 1e-3);
  EXPECT_EQ(std::stod(r[0].fields.at("synced_grad_diff")), 0.0);
}

TEST(DDPStrategy, MaxTimeStopsEveryRankAfterTheSameBatch) {
  const std::string out = out_prefix("max_time"), root = out_prefix("max_time_root");
  const std::string args = "--strategy ddp --devices 2 --steps -1 --epochs 1000 --step-sleep-ms 20 --max-time 0.6 ";
  const Outcome a = run(train(out, args + "--checkpoint 1 --root " + root));
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_TRUE(volt::testing::contains(a.output, "Time limit reached")) << a.output;
  const Result r0 = read_result(out + ".rank0"), r1 = read_result(out + ".rank1");
  EXPECT_EQ(r0.fields.at("global_step"), r1.fields.at("global_step"));
  const int steps = std::stoi(r0.fields.at("global_step"));
  EXPECT_GT(steps, 0);
  EXPECT_LT(steps, 600);  // 0.6 s at 20 ms or more a step: well under 30 steps
  EXPECT_EQ(r0.params, r1.params);
  // ModelCheckpoint saved the stopped run (epoch 0 is cut short: 40 batches take 0.8 s).
  EXPECT_TRUE(fs::exists(root + "/checkpoints/epoch=0-step=" + std::to_string(steps) + ".ckpt")) << a.output;
}

/// `common` (2 ranks, 20 steps) with an OnExceptionCheckpoint, rank 1's training_step throwing at step 5:
/// the failing run writes the checkpoint (`check_written` looks at it), a run resumed from it ends with
/// the uninterrupted run's weights on both ranks, and removes it. Returns the checkpoint's path.
std::string check_on_exception_resume(const std::string& name, const std::string& common,
                                      const std::function<void(const Outcome&, const std::string&)>& check_written) {
  const std::string out = out_prefix(name), dir = out_prefix(name + "_dir");
  const std::string ckpt = dir + "/on_exception.ckpt";
  const Outcome a = run(train(out, common + "--throw-rank 1 --throw-step 5 --timeout 30 --on-exception-dir " + dir));
  EXPECT_NE(a.code, 0) << a.output;
  EXPECT_TRUE(volt::testing::contains(a.output, "training_step threw at step 5")) << a.output;
  if (!fs::exists(ckpt)) {
    ADD_FAILURE() << "no " << ckpt << "\n" << a.output;
    return ckpt;
  }
  check_written(a, ckpt);
  const std::string resumed = out_prefix(name + "_resumed"), full = out_prefix(name + "_full");
  const Outcome r = run(train(resumed, common + "--ckpt " + ckpt + " --on-exception-dir " + dir));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(run(train(full, common)).code, 0);
  EXPECT_EQ(read_result(resumed + ".rank0").fields.at("global_step"), "20");
  EXPECT_EQ(read_result(resumed + ".rank0").params, read_result(full + ".rank0").params);
  EXPECT_EQ(read_result(resumed + ".rank1").params, read_result(full + ".rank0").params);
  EXPECT_FALSE(fs::exists(ckpt)) << "a fit that succeeds removes the checkpoint";
  return ckpt;
}

TEST(DDPStrategy, OnExceptionCheckpointIsWrittenByRankZeroWhenAnotherRankRaisesAndResumes) {
  check_on_exception_resume("on_exception", "--strategy ddp --devices 2 --steps 20 ",
                            [](const Outcome& a, const std::string&) {
                              EXPECT_LT(a.seconds, 25) << "rank 0 must not wait for the failed rank in a collective";
                            });
}

TEST(DDPStrategy, SmallBucketsGiveTheSameResult) {
  const std::string big = out_prefix("bucket_big"), small = out_prefix("bucket_small");
  ASSERT_EQ(run(train(big, "--strategy ddp --devices 2 --steps 10")).code, 0);
  const Outcome s = run(train(small, "--strategy ddp --devices 2 --steps 10 --bucket-mb 0.0001"));
  ASSERT_EQ(s.code, 0) << s.output;
  EXPECT_LE(max_abs_diff(read_result(big + ".rank0").params, read_result(small + ".rank0").params), 1e-6);
}

TEST(DDPStrategy, SyncDistLoggingAveragesAcrossRanks) {
  const std::string out = out_prefix("sync_log");
  const Outcome r = run(train(out, "--strategy ddp --devices 2 --steps 4 --sync-log 1"));
  ASSERT_EQ(r.code, 0) << r.output;
  // Rank 0 logs 0 and rank 1 logs 1: every rank sees the mean.
  EXPECT_EQ(read_result(out + ".rank0").fields.at("metric rank_value"), "0.5");
  EXPECT_EQ(read_result(out + ".rank1").fields.at("metric rank_value"), "0.5");
}

TEST(DDPSpawnStrategy, ParentHoldsTheTrainedStateAndASecondFitContinues) {
  const std::string spawn = out_prefix("spawn"), ddp = out_prefix("spawn_ref");
  const Outcome a = run(train(spawn, "--strategy ddp_spawn --devices 2 --steps 10 --fits 2 --sync-log 1"));
  ASSERT_EQ(a.code, 0) << a.output;
  const Outcome b = run(train(ddp, "--strategy ddp --devices 2 --steps 10 --fits 2 --sync-log 1"));
  ASSERT_EQ(b.code, 0) << b.output;
  // Only the parent writes (the workers exit after handing back): one file.
  EXPECT_FALSE(fs::exists(spawn + ".rank1"));
  const Result parent = read_result(spawn + ".rank0"), ref = read_result(ddp + ".rank0");
  EXPECT_EQ(parent.fields.at("global_step"), "20");
  EXPECT_EQ(parent.fields.at("epoch"), ref.fields.at("epoch"));
  EXPECT_EQ(parent.fields.at("metric rank_value"), "0.5");
  ASSERT_FALSE(parent.params.empty());
  EXPECT_EQ(parent.params, ref.params) << "ddp_spawn's hand-back must equal training in place";
  // The private hand-over folders are gone.
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path())) {
    EXPECT_EQ(e.path().filename().string().rfind("volt-spawn-", 0), std::string::npos) << e.path();
  }
}

// validate and predict through each launcher: ddp_spawn's parent gets back what rank 0 of the
// workers computed, as ddp's rank 0 computes it in place.
TEST(DDPSpawnStrategy, ValidateAndPredictReturnTheWorkersResultsToTheParent) {
  const std::string spawn = out_prefix("spawn_eval"), ddp = out_prefix("spawn_eval_ref");
  const Outcome a = run(train(spawn, "--strategy ddp_spawn --devices 2 --steps 10 --evaluate 1"));
  ASSERT_EQ(a.code, 0) << a.output;
  const Outcome b = run(train(ddp, "--strategy ddp --devices 2 --steps 10 --evaluate 1"));
  ASSERT_EQ(b.code, 0) << b.output;
  const Result parent = read_result(spawn + ".rank0"), ref = read_result(ddp + ".rank0");
  ASSERT_TRUE(ref.fields.count("validated_val_loss")) << "ddp's validate returned no val_loss";
  ASSERT_TRUE(parent.fields.count("validated_val_loss")) << "the parent got no validate metrics back";
  EXPECT_EQ(parent.fields.at("validated_val_loss"), ref.fields.at("validated_val_loss"));
  EXPECT_EQ(ref.fields.at("predicted_rows"), "640") << "predict_step ran over every row";
  EXPECT_EQ(parent.fields.at("predicted_rows"), ref.fields.at("predicted_rows"));
  EXPECT_EQ(parent.fields.at("predicted_sum"), ref.fields.at("predicted_sum"));
  EXPECT_TRUE(processes_with(spawn).empty()) << processes_with(spawn).front();
}

// Lightning's ddp_spawn semantics: the workers run the stage, the rest of the program runs
// once, in the parent (the workers are ended after their hand-back; none returns from fit).
// (A worker started for a later stage call runs the program up to that call, code between
// stage calls included: docs/distributed.md.)
TEST(DDPSpawnStrategy, CodeAfterFitRunsOnceInTheParent) {
  const std::string spawn = out_prefix("spawn_after"), ddp = out_prefix("spawn_after_ref");
  const Outcome a = run(train(spawn, "--strategy ddp_spawn --devices 2 --steps 5 --fits 2 --after-fit " + spawn +
                                         ".lines"));
  ASSERT_EQ(a.code, 0) << a.output;
  std::ifstream lines(spawn + ".lines");
  std::vector<std::string> after;
  for (std::string line; std::getline(lines, line);) after.push_back(line);
  EXPECT_EQ(after.size(), 1u) << "the code after fit ran " << after.size() << " times";
  EXPECT_TRUE(processes_with(spawn).empty()) << processes_with(spawn).front();
  // ddp's subprocess launcher re-runs the program: there every rank runs it.
  const Outcome b = run(train(ddp, "--strategy ddp --devices 2 --steps 5 --after-fit " + ddp + ".lines"));
  ASSERT_EQ(b.code, 0) << b.output;
  std::ifstream ddp_lines(ddp + ".lines");
  int count = 0;
  for (std::string line; std::getline(ddp_lines, line);) ++count;
  EXPECT_EQ(count, 2);
}

// strategy xla on the TPU emulation: 8 spawned processes (one per device of a v3-8), each
// on its own lazy device, gradients averaged through Gloo on host copies.
TEST(XLAStrategy, EightSpawnedProcessesEndWithIdenticalWeightsAndTheParentHoldsThem) {
  const std::string xla = out_prefix("xla"), cpu = out_prefix("xla_ref"), root = out_prefix("xla_root");
  const std::string common = "--batch 4 --samples 320 --steps 10 --fits 2 --sync-log 1";
  const Outcome a = run("VOLT_TPU_EMULATION=lazy VOLT_TPU_EMULATION_HOST=v3-8 MASTER_PORT=29517 " +
                        train(xla, "--accelerator tpu --strategy xla --devices 8 --dump-ranks 1 --checkpoint 1 "
                                   "--root " + root + " " + common));
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_FALSE(volt::testing::contains(a.output, "Pinned memory")) << a.output;
  // The reference: one CPU process with the 8 ranks' batches together.
  const Outcome b = run(train(cpu, "--strategy single_device --devices 1 --batch 32 --samples 320 --steps 10 "
                                   "--fits 2"));
  ASSERT_EQ(b.code, 0) << b.output;

  const Result worker0 = read_result(xla + ".worker0");
  ASSERT_FALSE(worker0.params.empty());
  for (int rank = 0; rank < 8; ++rank) {
    const Result w = read_result(xla + ".worker" + std::to_string(rank));
    EXPECT_EQ(w.fields.at("world_size"), "8") << "rank " << rank;
    EXPECT_EQ(w.fields.at("device"), "lazy:" + std::to_string(rank)) << "each process trains on its own device";
    EXPECT_EQ(w.params, worker0.params) << "rank " << rank << " must end bitwise equal to rank 0";
  }
  const Result parent = read_result(xla + ".rank0");
  EXPECT_EQ(parent.params, worker0.params) << "the parent must hold the workers' weights";
  EXPECT_EQ(parent.fields.at("global_step"), "20") << "the second fit continues from the first";
  EXPECT_EQ(parent.fields.at("metric rank_value"), "3.5") << "sync_dist averages over the 8 ranks";
  const Result ref = read_result(cpu + ".rank0");
  EXPECT_LE(max_abs_diff(parent.params, ref.params), 1e-5)
      << "8 ranks x batch 4 with averaged gradients must train as 1 process x batch 32";

  // Rank 0 wrote the checkpoints from CPU copies: the last one resumes on the CPU and
  // continues as the CPU run does.
  std::string last;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.path().extension() == ".ckpt" && e.path().filename().string().find("step=20") != std::string::npos) {
      last = e.path().string();
    }
  }
  ASSERT_FALSE(last.empty()) << "no checkpoint of step 20 under " << root;
  const std::string resumed = out_prefix("xla_resumed"), ref30 = out_prefix("xla_ref30");
  const Outcome c = run(train(resumed, "--strategy single_device --devices 1 --batch 32 --samples 320 --steps 30 "
                                       "--root " + root + "_cpu --ckpt " + last));
  ASSERT_EQ(c.code, 0) << c.output;
  ASSERT_EQ(run(train(ref30, "--strategy single_device --devices 1 --batch 32 --samples 320 --steps 30")).code, 0);
  EXPECT_EQ(read_result(resumed + ".rank0").fields.at("global_step"), "30");
  EXPECT_LE(max_abs_diff(read_result(resumed + ".rank0").params, read_result(ref30 + ".rank0").params), 1e-5);
}

// A runtime library with its own collective (VoltTpuRuntime::all_reduce_mean): xla averages
// the gradients through it, not through Gloo.
TEST(XLAStrategy, ARuntimeWithItsOwnCollectiveAveragesTheGradients) {
  const std::string xla = out_prefix("xla_lib"), cpu = out_prefix("xla_lib_ref");
  const Outcome a = run(std::string("VOLT_TPU_RUNTIME_LIBRARY=") + VOLT_TEST_TPU_RUNTIME +
                        " TPU_ACCELERATOR_TYPE=v4-8 MASTER_PORT=29541 " +
                        train(xla, "--accelerator tpu --strategy xla --devices 4 --batch 8 --samples 320 --steps 10 "
                                   "--dump-ranks 1"));
  ASSERT_EQ(a.code, 0) << a.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(volt::testing::contains(a.output, "volt-test-runtime: rank " + std::to_string(rank) +
                                                      " averages gradients with the runtime's own collective"))
        << a.output;
  }
  ASSERT_EQ(run(train(cpu, "--strategy single_device --devices 1 --batch 32 --samples 320 --steps 10")).code, 0);
  const Result parent = read_result(xla + ".rank0");
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(read_result(xla + ".worker" + std::to_string(rank)).params, parent.params) << "rank " << rank;
  }
  EXPECT_LE(max_abs_diff(parent.params, read_result(cpu + ".rank0").params), 1e-5);
}

TEST(VoltLaunch, RunsEveryRankWithTorchrunVariables) {
  const std::string out = out_prefix("launch");
  const Outcome r = run(kVolt + " launch --nproc-per-node 2 -- " + train(out, "--strategy ddp --devices 2 --steps 10"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_result(out + ".rank0").params, read_result(out + ".rank1").params);
  EXPECT_EQ(read_result(out + ".rank1").fields.at("world_size"), "2");
}

namespace {

void expect_job_stopped(const Outcome& r, const std::string& marker, const std::string& rank_text) {
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, rank_text)) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "SIGKILL")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "about to die")) << "the failed rank's stderr tail:\n" << r.output;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_TRUE(processes_with(marker).empty()) << processes_with(marker).front();
}

}  // namespace

// The tuner under ddp: rank 0's learning-rate curve and every rank's memory verdict decide for all, so
// both ranks suggest the same rate and choose the same batch size (each rank's losses differ).
TEST(DDPStrategy, TunerSuggestionAndBatchSizeAgreeAcrossRanks) {
  const std::string out = out_prefix("tune");
  const Outcome r = run(kVolt + " launch --nproc-per-node 2 -- " +
                        train(out, "--strategy ddp --devices 2 --steps 10 --shuffle 1 --tune 1 --tune-budget 60000"));
  ASSERT_EQ(r.code, 0) << r.output;
  const Result a = read_result(out + ".rank0"), b = read_result(out + ".rank1");
  ASSERT_TRUE(a.fields.count("lr_suggestion")) << r.output;
  EXPECT_NE(a.fields.at("lr_suggestion"), "-0x1p+0") << "no suggestion";
  EXPECT_EQ(a.fields.at("lr_suggestion"), b.fields.at("lr_suggestion"));
  EXPECT_EQ(a.fields.at("lr_steps"), b.fields.at("lr_steps"));
  EXPECT_EQ(a.fields.at("tuned_batch"), b.fields.at("tuned_batch"));
  EXPECT_GT(std::stoll(a.fields.at("tuned_batch")), 2);
  // The fit after the tuning trains both ranks alike, as without it.
  EXPECT_EQ(a.params, b.params);
}

TEST(VoltLaunch, KillingOneRankStopsTheJobAndReportsIt) {
  const std::string out = out_prefix("kill_launch");
  const Outcome r = run(kVolt + " launch --nproc-per-node 2 -- " +
                    train(out, "--strategy ddp --devices 2 --steps 100000 --samples 6400 --die-rank 1 --die-step 5"));
  expect_job_stopped(r, out, "rank 1 (pid");
}

TEST(DDPStrategy, SubprocessLauncherStopsTheJobWhenARankDies) {
  const std::string out = out_prefix("kill_subprocess");
  const Outcome r = run(train(out, "--strategy ddp --devices 2 --steps 100000 --samples 6400 --die-rank 1 --die-step 5"));
  expect_job_stopped(r, out, "rank 1 (pid");
}

// Rank 0 blocked where the failure cannot reach it (here a 60 s sleep in its step; in the field, Gloo's set-up
// waiting for a rank that died after the rendezvous): the launcher's monitor ends it 5 s after the report.
TEST(DDPStrategy, SubprocessLauncherEndsARankZeroThatStaysBlockedAfterARankDied) {
  const std::string out = out_prefix("kill_blocked");
  const Outcome r = run(train(out, "--strategy ddp --devices 2 --steps 100000 --samples 6400 --die-rank 1 --die-step 2 "
                                   "--stall-rank-in-step 0 --stall-seconds 60"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "rank 1 (pid")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "SIGKILL")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "volt: rank 0 (pid ")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "is still inside its stage 5 s after that failure")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "no process of the job is left behind")) << r.output;
  EXPECT_GT(r.seconds, 4.0) << "the grace period";
  EXPECT_LT(r.seconds, 20.0) << "rank 0 would sleep 60 s";
  EXPECT_TRUE(processes_with(out).empty()) << processes_with(out).front();
}

TEST(DDPSpawnStrategy, AWorkerDyingFailsTheParentWithItsReport) {
  const std::string out = out_prefix("kill_spawn");
  const Outcome r =
      run(train(out, "--strategy ddp_spawn --devices 2 --steps 100000 --samples 6400 --die-rank 0 --die-step 5"));
  expect_job_stopped(r, out, "rank 0 (pid");
  EXPECT_TRUE(volt::testing::contains(r.output, "spawned worker failed")) << r.output;
}

// A worker whose stage throws returns the error from its fit (its main exits with its own
// code); the parent's fit throws a DistributedError naming that rank and its message.
TEST(DDPSpawnStrategy, AWorkerThatThrowsFailsTheParentsFitWithItsRankAndMessage) {
  const std::string out = out_prefix("throw_spawn");
  const Outcome r = run(train(out, "--strategy ddp_spawn --devices 2 --steps 100000 --samples 6400 --throw-rank 1 "
                                   "--throw-step 3"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "volt_dist_program: DistributedError: ")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "a spawned worker failed, so the job was stopped: rank 1 (pid"))
      << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "| volt_dist_program: ")) << "the worker's stderr in the report";
  EXPECT_TRUE(volt::testing::contains(r.output, "rank 1: training_step threw at step 3 (test)")) << r.output;
  EXPECT_LT(r.seconds, 30.0);
  EXPECT_TRUE(processes_with(out).empty()) << processes_with(out).front();
  EXPECT_FALSE(fs::exists(out + ".rank0")) << "the parent's fit must throw";
}

TEST(XLAStrategy, AWorkerDyingStopsTheOtherSevenAndFailsTheParentWithItsReport) {
  const std::string out = out_prefix("kill_xla");
  const Outcome r = run("VOLT_TPU_EMULATION=lazy VOLT_TPU_EMULATION_HOST=v3-8 MASTER_PORT=29543 " +
                        train(out, "--accelerator tpu --strategy xla --devices 8 --batch 4 --steps 100000 "
                                   "--samples 6400 --die-rank 5 --die-step 5"));
  expect_job_stopped(r, out, "rank 5 (pid");
  EXPECT_TRUE(volt::testing::contains(r.output, "spawned worker failed")) << r.output;
}

TEST(DDPStrategy, ACollectiveOnAStalledPeerTimesOutWithTheOperationNamed) {
  const std::string out = out_prefix("stall");
  const Outcome r = run(kVolt + " launch --nproc-per-node 2 -- " +
                    train(out, "--strategy ddp --devices 2 --steps 50 --timeout 3 --stall-rank-in-step 1 "
                               "--stall-seconds 30"));
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(volt::testing::contains(r.output, "rank 0 on host")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "gradient allreduce")) << r.output;
  EXPECT_GE(r.seconds, 2.5);
  EXPECT_LT(r.seconds, 20.0) << "gave up at the 3 s timeout, not the 30 s stall";
  EXPECT_TRUE(processes_with(out).empty());
}

TEST(DDPRendezvous, RanksThatDisagreeOnTheWorldSizeFailClearly) {
  const std::string out = out_prefix("ws");
  const std::string port = "29517";
  const std::string base = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " ";
  const Outcome r = run("(" + base + "WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 " +
                    train(out, "--strategy ddp --devices 2 --rendezvous-timeout 5") + " & " + base +
                    "WORLD_SIZE=3 RANK=1 LOCAL_RANK=1 " + train(out, "--strategy ddp --devices 3 --rendezvous-timeout 5") +
                    "; wait)");
  // Whichever rank reads the other's announcement first names both sizes (the other may then
  // only see the rendezvous closing under it).
  EXPECT_TRUE(volt::testing::contains(r.output, "WORLD_SIZE=3") && volt::testing::contains(r.output, "WORLD_SIZE=2"))
      << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "Every rank must be started with the same world size")) << r.output;
}

TEST(DDPRendezvous, AnUnreachableMasterFailsWithinTheTimeoutNamingAddressAndPort) {
  const std::string out = out_prefix("unreachable");
  // 10.255.255.1 is not routed here; connect attempts fail or hang until the timeout.
  const Outcome r = run("MASTER_ADDR=10.255.255.1 MASTER_PORT=29518 WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 " +
                    train(out, "--strategy ddp --devices 2 --rendezvous-timeout 3"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "10.255.255.1:29518")) << r.output;
  EXPECT_LT(r.seconds, 15.0);
}

TEST(DDPRendezvous, AMasterAddrThatDoesNotResolveIsReportedAtOnce) {
  const std::string out = out_prefix("unresolved");
  // ".invalid" never resolves (RFC 2606): no waiting for the rendezvous timeout.
  const Outcome r = run("MASTER_ADDR=no-such-host.invalid MASTER_PORT=29519 WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 " +
                        train(out, "--strategy ddp --devices 2 --rendezvous-timeout 30"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "MASTER_ADDR=no-such-host.invalid does not resolve")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "rank 1 on host")) << r.output;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(DDPRendezvous, AMasterPortInUseIsReported) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  const std::string out = out_prefix("port");
  const Outcome r = run("MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 " +
                    train(out, "--strategy ddp --devices 2 --rendezvous-timeout 3"));
  ::close(fd);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "127.0.0.1:" + port)) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "in use")) << r.output;
}

TEST(DDPRendezvous, PartialLaunchVariablesAreRefused) {
  const std::string out = out_prefix("partial");
  const Outcome r = run("env -u WORLD_SIZE RANK=1 " + train(out, "--strategy ddp --devices 2"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "RANK")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "WORLD_SIZE")) << r.output;
}

TEST(VoltLaunch, WarnsWhenThereAreMoreProcessesThanCores) {
  const Outcome r = run(kVolt + " launch --nproc-per-node 64 -- /bin/true");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "warning: --nproc-per-node 64 is more than")) << r.output;
}

TEST(VoltLaunch, RejectsBadArguments) {
  EXPECT_NE(run(kVolt + " launch --nproc-per-node 0 -- /bin/true").code, 0);
  const Outcome r = run(kVolt + " launch --nnodes 2 -- /bin/true");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(volt::testing::contains(r.output, "--master-addr")) << r.output;
  EXPECT_NE(run(kVolt + " launch --nproc-per-node 2 -- /nonexistent/prog").code, 0);
}

// ---------------------------------------------------------------- CUDA (a GPU and a CUDA LibTorch)
// Skipped where `volt plan --accelerator cuda` refuses (no CUDA in this LibTorch, or no GPU);
// on a GPU machine they run (docs/distributed.md, "Not done here": what a GPU check needs).

namespace {

/// Empty when this build and machine can train on CUDA; else why not.
std::string cuda_unavailable() {
  const Outcome r = run(kVolt + " plan --accelerator cuda --devices 1");
  return r.code == 0 ? "" : r.output;
}

}  // namespace

TEST(CudaDDP, NcclProcessGroupOfOneRankTrainsAsOneDevice) {
  if (const std::string why = cuda_unavailable(); !why.empty()) GTEST_SKIP() << "no CUDA here: " << why;
  const std::string ddp = out_prefix("cuda_nccl"), one = out_prefix("cuda_single");
  const Outcome a = run(train(ddp, "--accelerator cuda --strategy ddp --devices 1 --backend nccl --steps 20"));
  ASSERT_EQ(a.code, 0) << a.output;
  const Outcome b = run(train(one, "--accelerator cuda --strategy single_device --devices 1 --steps 20"));
  ASSERT_EQ(b.code, 0) << b.output;
  const Result r = read_result(ddp + ".rank0");
  EXPECT_EQ(r.fields.at("world_size"), "1");
  ASSERT_FALSE(r.params.empty());
  EXPECT_LE(max_abs_diff(r.params, read_result(one + ".rank0").params), 1e-6);
}

TEST(CudaDDP, GlooOnCudaTensorsMatchesTheCpuRun) {
  if (const std::string why = cuda_unavailable(); !why.empty()) GTEST_SKIP() << "no CUDA here: " << why;
  const std::string gpu = out_prefix("cuda_gloo"), cpu = out_prefix("cuda_gloo_cpu");
  const Outcome a = run(train(gpu, "--accelerator cuda --strategy ddp --devices 1 --backend gloo --steps 20"));
  ASSERT_EQ(a.code, 0) << a.output;
  ASSERT_EQ(run(train(cpu, "--strategy single_device --devices 1 --steps 20")).code, 0);
  // CUDA and CPU kernels round differently; 20 SGD steps on a tiny MLP stay close.
  EXPECT_LE(max_abs_diff(read_result(gpu + ".rank0").params, read_result(cpu + ".rank0").params), 1e-4);
}

TEST(DDPStrategy, BFloat16ParametersAreAveragedInFloat32OverGloo) {
  const auto r = ddp_and_one_process("bf16", 8, "--steps 5 --precision bf16-true");
  EXPECT_EQ(r[0].params, r[1].params);
  // bf16 keeps ~3 significant digits; the averages differ from one process's by rounding only.
  EXPECT_LE(max_abs_diff(r[0].params, r[2].params), 1e-2);
}

TEST(DDPStrategy, SigtermStopsEveryRankTogetherAndTheResumeIsBitwiseExact) {
  const std::string full = out_prefix("resume_full"), part = out_prefix("resume_part"),
                    resumed = out_prefix("resume_resumed"), root = out_prefix("resume_root");
  const std::string common = "--strategy ddp --devices 2 --steps 30 --shuffle 1 --samples 320 ";
  ASSERT_EQ(run(train(full, common + "--root " + root + "_a")).code, 0);
  // SIGTERM reaches rank 0 at its 13th step; it passes the signal to rank 1, both finish the
  // step, agree, save one checkpoint and stop.
  const Outcome p = run(train(part, common + "--root " + root + "_b --interrupt-step 13"));
  ASSERT_EQ(p.code, 0) << p.output;
  EXPECT_TRUE(volt::testing::contains(p.output, "received SIGTERM")) << p.output;
  EXPECT_EQ(read_result(part + ".rank0").fields.at("global_step"), read_result(part + ".rank1").fields.at("global_step"));
  EXPECT_NE(read_result(part + ".rank0").fields.at("global_step"), "30");
  const std::string ckpt = root + "_b/checkpoints/interrupted.ckpt";
  ASSERT_TRUE(fs::exists(ckpt));
  // The resume crosses an epoch boundary with a shuffled, distributed sampler.
  const Outcome r = run(train(resumed, common + "--root " + root + "_b --ckpt " + ckpt));
  ASSERT_EQ(r.code, 0) << r.output;
  const Result a = read_result(full + ".rank0");
  EXPECT_EQ(read_result(resumed + ".rank0").params, a.params);
  EXPECT_EQ(read_result(resumed + ".rank1").params, a.params);
  EXPECT_EQ(read_result(resumed + ".rank0").fields.at("global_step"), "30");
}

TEST(DDPStrategy, ARequeueSignalThatReachesOneRankFirstRequeuesOnceAndItsLateCopyKillsNoRank) {
  // Slurm's scancel --signal=USR1 (or --signal=USR1@90) reaches a job's tasks one after another.
  // Here rank 1 gets it in its 6th step (--signal-step 5 counts from 0) and rank 0 only after the fit stopped: both must stop at
  // the same step as a requeue (hpc_ckpt_1.ckpt, one requeue by rank 0), and rank 0's late copy
  // must not kill it (CI once saw rank 0 save interrupted.ckpt "on signal 0" and rank 1 die of
  // its own late SIGUSR1, exit 138).
  const std::string out = out_prefix("late_requeue"), root = out_prefix("late_requeue_root");
  fs::create_directories(root);
  const std::string scontrol = root + "/scontrol";
  std::ofstream(scontrol) << "#!/bin/sh\necho \"$@\" >> '" << root << "/scontrol.log'\n";
  fs::permissions(scontrol, fs::perms::owner_all);
  auto rank = [&](int r) {
    return "env -u RANK -u WORLD_SIZE -u LOCAL_RANK SLURM_NTASKS=2 SLURM_PROCID=" + std::to_string(r) +
           " SLURM_LOCALID=" + std::to_string(r) +
           " SLURM_NODEID=0 SLURM_JOB_ID=4242 SLURM_JOB_NAME=volt_test SLURM_NODELIST=127.0.0.1 MASTER_PORT=29561 " +
           train(out, "--strategy ddp --devices 2 --steps 30 --samples 320 --root " + root +
                          " --signal-rank 1 --signal-step 5 --signal SIGUSR1 --late-signal 1 --requeue-command '" +
                          scontrol + " requeue'");
  };
  const Outcome r = run("(" + rank(0) + " & p0=$!; " + rank(1) + "; c1=$?; wait $p0; echo \"exit codes $? $c1\")");
  EXPECT_TRUE(volt::testing::contains(r.output, "exit codes 0 0")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "received SIGUSR1: finished step")) << r.output;
  EXPECT_FALSE(volt::testing::contains(r.output, "signal 0")) << r.output;
  EXPECT_TRUE(fs::exists(root + "/hpc_ckpt_1.ckpt")) << r.output;
  EXPECT_FALSE(fs::exists(root + "/checkpoints/interrupted.ckpt")) << r.output;
  std::ifstream log(root + "/scontrol.log");
  const std::string calls((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(calls, "requeue 4242\n");
  const Result a = read_result(out + ".rank0"), b = read_result(out + ".rank1");
  EXPECT_EQ(a.fields.at("global_step"), b.fields.at("global_step"));
  // The signal comes inside the 6th step's training_step, after that step's vote started: the
  // 7th step's vote carries it, and both ranks stop after step 7 (the vote overlaps the step).
  EXPECT_EQ(a.fields.at("global_step"), "7");
  EXPECT_EQ(a.params, b.params);
}

TEST(DDPRendezvous, AWaitingRankSaysWhomItWaitsForAndTheTimeLeft) {
  const std::string out = out_prefix("waits_for_rank1");
  // Rank 1 never starts: rank 0 reports every few seconds, then fails at the timeout.
  const Outcome r = run("MASTER_ADDR=127.0.0.1 MASTER_PORT=29541 WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 " +
                        train(out, "--strategy ddp --devices 2 --rendezvous-timeout 12"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "waits at 127.0.0.1:29541 for rank 1 of 2 (not joined yet); "))
      << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, " s left")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "never joined")) << r.output;
}

TEST(DDPRendezvous, ARankWithoutRankZeroSaysItWaitsForRankZero) {
  const std::string out = out_prefix("waits_for_rank0");
  const Outcome r = run("MASTER_ADDR=127.0.0.1 MASTER_PORT=29542 WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 " +
                        train(out, "--strategy ddp --devices 2 --rendezvous-timeout 12"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "rank 1 on host")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "waits for rank 0 (the rendezvous at 127.0.0.1:29542 is not open yet)"))
      << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "never opened")) << r.output;
  EXPECT_LT(r.seconds, 30.0);
}

TEST(DDPRendezvous, StoreListensOnlyOnMasterAddr) {
  // LibTorch >= 2.3: the TCPStore takes over a socket bound to MASTER_ADDR. LibTorch 1.13's
  // TCPStore would listen on every interface, so a loopback job rendezvouses through a file
  // store and rank 0 holds the port on the loopback address only. Either way: one listener.
  const std::string out = out_prefix("bind");
  const int port = 29543;
  char hex_port[8];
  std::snprintf(hex_port, sizeof(hex_port), "%04X", port);
  // Rank 0 waits for a rank 1 that never comes; meanwhile its store's listening socket is
  // read from /proc/net/tcp{,6} (local address, state 0A = LISTEN).
  const Outcome r = run("MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                        " WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 " + train(out, "--strategy ddp --devices 2 --rendezvous-timeout 8") +
                        " >/dev/null 2>&1 & sleep 4; grep -h ':" + hex_port + " [0-9A-F:]* 0A' /proc/net/tcp /proc/net/tcp6; wait");
  EXPECT_TRUE(volt::testing::contains(r.output, "0100007F:" + std::string(hex_port))) << r.output;
  EXPECT_FALSE(volt::testing::contains(r.output, "00000000:" + std::string(hex_port))) << "bound to 0.0.0.0:\n" << r.output;
  EXPECT_FALSE(volt::testing::contains(r.output, "00000000000000000000000000000000:" + std::string(hex_port)))
      << "bound to [::]:\n" << r.output;
}

// --- communication hooks (ddp.comm_hook; docs/distributed.md, "Communication hooks") ---

namespace {

/// 2 ddp ranks, batch 8 each, with `extra`: {rank 0, rank 1}.
std::vector<Result> two_ranks(const std::string& name, const std::string& extra) {
  const std::string out = out_prefix(name);
  const Outcome a = run(train(out, "--strategy ddp --devices 2 --batch 8 " + extra));
  EXPECT_EQ(a.code, 0) << a.output;
  return {read_result(out + ".rank0"), read_result(out + ".rank1")};
}

double field(const Result& r, const std::string& key) {
  auto it = r.fields.find(key);
  EXPECT_NE(it, r.fields.end()) << key << " is not in the result";
  return it == r.fields.end() ? -1.0 : std::stod(it->second);
}

}  // namespace

TEST(DDPCommHooks, AllreduceHookEqualsPlainDDPBitwise) {
  const auto plain = two_ranks("hook_plain", "--steps 20 --shuffle 1");
  const auto hooked = two_ranks("hook_allreduce", "--steps 20 --shuffle 1 --comm-hook allreduce");
  ASSERT_FALSE(plain[0].params.empty());
  EXPECT_EQ(hooked[0].params, plain[0].params);
  EXPECT_EQ(hooked[1].params, plain[0].params);
}

// fp16: each rank's gradient rounded to float16 (unit roundoff u = 2^-11), halved (exact), summed in
// float16 (u again): |hook - exact average| <= u |g0|/2 + u |g1|/2 + u |sum| <= 2u (1 + u) mean|g|, so
// 2^-10 of the mean magnitude, plus float16's subnormal spacing (2^-24 absolute) below 2^-14.
TEST(DDPCommHooks, Fp16HookStaysWithinTwoToTheMinusTenOfTheExactAverageEveryStep) {
  const auto r = two_ranks("hook_fp16", "--steps 20 --check-hook fp16");
  const auto plain = two_ranks("hook_fp16_plain", "--steps 20");
  EXPECT_EQ(field(r[0], "hook_calls"), 20.0);
  const double err = field(r[0], "hook_max_rel_err");
  EXPECT_GT(err, 0.0) << "float16 must round somewhere (the check can fail)";
  EXPECT_LE(err, std::ldexp(1.0, -10) * (1 + std::ldexp(1.0, -11)));
  EXPECT_LE(field(r[1], "hook_max_rel_err"), std::ldexp(1.0, -10) * (1 + std::ldexp(1.0, -11)));
  EXPECT_EQ(r[0].params, r[1].params);
  EXPECT_GT(max_abs_diff(r[0].params, plain[0].params), 0.0);
  EXPECT_LE(max_abs_diff(r[0].params, plain[0].params), 1e-3);
}

// bf16: u = 2^-8; the rounding to bfloat16 and the rounding of the float32 sum of the gathered values
// (exact in float32) back to bfloat16: <= 2u (1 + u) mean|g| = 2^-7 (1 + 2^-8).
TEST(DDPCommHooks, Bf16HookStaysWithinTwoToTheMinusSevenOfTheExactAverageEveryStep) {
  const auto r = two_ranks("hook_bf16", "--steps 20 --check-hook bf16");
  EXPECT_EQ(field(r[0], "hook_calls"), 20.0);
  const double err = field(r[0], "hook_max_rel_err");
  EXPECT_GT(err, std::ldexp(1.0, -11)) << "bfloat16 rounds more coarsely than float16";
  EXPECT_LE(err, std::ldexp(1.0, -7) * (1 + std::ldexp(1.0, -8)));
  EXPECT_LE(field(r[1], "hook_max_rel_err"), std::ldexp(1.0, -7) * (1 + std::ldexp(1.0, -8)));
  EXPECT_EQ(r[0].params, r[1].params);
}

TEST(DDPCommHooks, AUsersHookObjectReducesEveryBucket) {
  const auto plain = two_ranks("hook_user_plain", "--steps 20");
  const auto r = two_ranks("hook_user", "--steps 20 --custom-hook 1");
  EXPECT_EQ(field(r[0], "custom_hook_calls"), 20.0) << "one bucket per step";
  EXPECT_EQ(r[0].params, r[1].params);
  EXPECT_LE(max_abs_diff(r[0].params, plain[0].params), 1e-6);
}

TEST(DDPCommHooks, PowerSGDIsExactDuringWarmUpAndCompressesAfterIt) {
  const auto plain = two_ranks("psgd_plain", "--steps 20");
  const auto warm = two_ranks("psgd_warmup", "--steps 20 --comm-hook powersgd --psgd-start 20");
  EXPECT_EQ(warm[0].params, plain[0].params) << "20 warm-up steps of plain allreduce";
  EXPECT_EQ(warm[1].params, plain[0].params);
  const auto compressed = two_ranks("psgd_after", "--steps 20 --comm-hook powersgd --psgd-start 10");
  EXPECT_EQ(compressed[0].params, compressed[1].params);
  EXPECT_GT(max_abs_diff(compressed[0].params, plain[0].params), 1e-6) << "rank-1 compression from step 10";
}

// fc1 (16x8) at rank 8 and fc2 (1x16) at rank 1 are full rank: P Q^T = P P^T M_avg = M_avg, so the
// average is exact up to float32 rounding, which Gram-Schmidt on 8 columns amplifies by P's condition
// number: measured 7e-6 (no error feedback) and 1.4e-5 (with it: each rank's error then holds its
// deviation from the mean, which the next sum cancels) of the bucket's norm; the bound is 1e-4.
TEST(DDPCommHooks, PowerSGDAtFullRankMatchesPlainAllreduce) {
  const auto plain = two_ranks("psgd_full_plain", "--steps 20");
  const std::string full = "--steps 20 --check-hook powersgd --psgd-start 0 --psgd-rank 16 --psgd-min-rate 0 ";
  for (const std::string ef : {"1", "0"}) {
    SCOPED_TRACE("use_error_feedback=" + ef);
    const auto r = two_ranks("psgd_full_ef" + ef, full + "--psgd-ef " + ef);
    EXPECT_EQ(field(r[0], "hook_calls"), 20.0);
    EXPECT_LE(field(r[0], "hook_max_norm_err"), 1e-4);
    EXPECT_LE(field(r[1], "hook_max_norm_err"), 1e-4);
    EXPECT_EQ(r[0].params, r[1].params);
    EXPECT_LE(max_abs_diff(r[0].params, plain[0].params), 1e-5);
  }
  const auto low = two_ranks("psgd_low", "--steps 20 --check-hook powersgd --psgd-start 0 --psgd-min-rate 0");
  EXPECT_GT(field(low[0], "hook_max_norm_err"), 0.1) << "rank 1 is not exact (the checks above can fail)";
}

TEST(DDPCommHooks, PowerSGDErrorFeedbackIsCheckpointedAndTheResumeIsBitwiseExact) {
  const std::string full = out_prefix("psgd_resume_full"), part = out_prefix("psgd_resume_part"),
                    resumed = out_prefix("psgd_resume_resumed"), root = out_prefix("psgd_resume_root");
  const std::string common = "--strategy ddp --devices 2 --steps 30 --shuffle 1 --samples 320 --psgd-start 5 "
                             "--comm-hook powersgd ";
  ASSERT_EQ(run(train(full, common + "--root " + root + "_a")).code, 0);
  const Outcome p = run(train(part, common + "--root " + root + "_b --interrupt-step 13"));
  ASSERT_EQ(p.code, 0) << p.output;
  const std::string ckpt = root + "_b/checkpoints/interrupted.ckpt";
  ASSERT_TRUE(fs::exists(ckpt));
  const Outcome r = run(train(resumed, common + "--root " + root + "_b --ckpt " + ckpt));
  ASSERT_EQ(r.code, 0) << r.output;
  const Result a = read_result(full + ".rank0");
  ASSERT_FALSE(a.params.empty());
  EXPECT_EQ(read_result(resumed + ".rank0").params, a.params);
  EXPECT_EQ(read_result(resumed + ".rank1").params, a.params);
  // The same resume with the hook's saved state dropped (a user hook around PowerSGD that ignores
  // load_state_dict): a fresh error feedback and Q give other weights, so the equality above is the state's.
  const std::string fresh = out_prefix("psgd_resume_fresh");
  const std::string no_hook_flag = common.substr(0, common.find("--comm-hook"));
  const Outcome f = run(train(fresh, no_hook_flag + "--root " + root + "_b --ckpt " + ckpt +
                                         " --check-hook powersgd --drop-hook-state 1"));
  ASSERT_EQ(f.code, 0) << f.output;
  EXPECT_NE(read_result(fresh + ".rank0").params, a.params);
}

TEST(DDPCommHooks, AnUnknownHookIsRefusedBeforeAnyRankStarts) {
  const std::string out = out_prefix("hook_unknown");
  const Outcome r = run(train(out, "--strategy ddp --devices 2 --comm-hook fp8"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "ddp.comm_hook='fp8'")) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "allreduce, fp16, bf16 or powersgd")) << r.output;
  EXPECT_FALSE(fs::exists(out + ".rank1")) << "no rank may have started";
  const Outcome bad_rank = run(train(out, "--strategy ddp --devices 2 --comm-hook powersgd --psgd-rank 0"));
  EXPECT_EQ(bad_rank.code, 3) << bad_rank.output;
  EXPECT_TRUE(volt::testing::contains(bad_rank.output, "matrix_approximation_rank=0")) << bad_rank.output;
}

// Streams under ddp (docs/data.md "Iterable datasets and the loader"): 2 ranks x 3 loader workers
// read 6 disjoint shards of one ShardedDataset.
std::vector<int64_t> stream_ids_of(const Result& r) {
  std::vector<int64_t> ids;
  std::stringstream in(r.fields.count("stream_ids") ? r.fields.at("stream_ids") : std::string());
  for (std::string id; std::getline(in, id, ',');) ids.push_back(std::stoll(id));
  return ids;
}

TEST(DDPStrategy, AStreamOnTwoRanksOfThreeWorkersTrainsOnEverySampleExactlyOnce) {
  const std::string out = out_prefix("stream_even");
  const Outcome r = run(train(out, "--strategy ddp --devices 2 --stream 3 --samples 48 --batch 4 --steps -1 --epochs 1"));
  ASSERT_EQ(r.code, 0) << r.output;
  const Result a = read_result(out + ".rank0"), b = read_result(out + ".rank1");
  std::vector<int64_t> all = stream_ids_of(a);
  const std::vector<int64_t> second = stream_ids_of(b);
  EXPECT_EQ(all.size(), 24u);
  EXPECT_EQ(second.size(), 24u);
  all.insert(all.end(), second.begin(), second.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(48);
  for (int64_t i = 0; i < 48; ++i) expected[static_cast<size_t>(i)] = i;
  EXPECT_EQ(all, expected) << "every sample once, none on both ranks";
  EXPECT_EQ(a.fields.at("global_step"), "6");
  EXPECT_EQ(a.params, b.params);
}

TEST(DDPStrategy, AStreamResumedMidEpochGivesEachRankItsOwnPosition) {
  // Rank 1's first worker holds 4 samples, the others 8 or 10 (SkewedStream in dist_program.cpp): after
  // 4 batches rank 0 has read 8, 4 and 4 examples of its workers and rank 1 4, 8 and 4. SIGTERM in the 4th
  // step (the 5th step's vote carries it: both ranks stop after 5 batches, mid-epoch), then a resume: each rank must go on from its own position, so that the interrupted run and its resume
  // train every rank on the samples the uninterrupted run did, in the same order, to the same weights.
  const std::string full = out_prefix("stream_skew_full"), part = out_prefix("stream_skew_part"),
                    resumed = out_prefix("stream_skew_resumed"), root = out_prefix("stream_skew_root");
  const std::string common = "--strategy ddp --devices 2 --stream 3 --stream-skew 1 --samples 48 --batch 4 "
                             "--steps -1 --epochs 1 ";
  const Outcome f = run(train(full, common + "--root " + root + "_a"));
  ASSERT_EQ(f.code, 0) << f.output;
  const Outcome p = run(train(part, common + "--root " + root + "_b --interrupt-step 3"));
  ASSERT_EQ(p.code, 0) << p.output;
  const std::string ckpt = root + "_b/checkpoints/interrupted.ckpt";
  ASSERT_TRUE(fs::exists(ckpt)) << p.output;
  const Outcome r = run(train(resumed, common + "--root " + root + "_b --ckpt " + ckpt));
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* rank : {".rank0", ".rank1"}) {
    std::vector<int64_t> joined = stream_ids_of(read_result(part + rank));
    EXPECT_GT(joined.size(), 0u) << rank;
    EXPECT_LT(joined.size(), 24u) << rank << ": the interrupted run stopped mid-epoch";
    const std::vector<int64_t> rest = stream_ids_of(read_result(resumed + rank));
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, stream_ids_of(read_result(full + rank))) << rank;
  }
  EXPECT_EQ(read_result(resumed + ".rank0").params, read_result(full + ".rank0").params);
  EXPECT_EQ(read_result(resumed + ".rank1").params, read_result(full + ".rank0").params);
  // One process cannot take over two ranks' positions: refused before any step, naming both counts.
  const Outcome one = run(train(out_prefix("stream_skew_one"), "--strategy single_device --devices 1 --stream 3 "
                                "--samples 48 --batch 4 --steps -1 --epochs 1 --root " + root + "_c --ckpt " + ckpt));
  EXPECT_NE(one.code, 0) << one.output;
  EXPECT_TRUE(volt::testing::contains(one.output, "stream positions of 2 ranks")) << one.output;
  EXPECT_TRUE(volt::testing::contains(one.output, "this run has 1")) << one.output;
}

TEST(DDPStrategy, AStreamThatEndsEarlierOnOneRankEndsTheEpochOnEveryRank) {
  // 49 samples: rank 0's first worker holds 9, every other shard 8, so rank 0 has a 7th batch
  // (sample 48 alone) that rank 1 lacks. The ranks agree to stop after 6 batches, in training and in
  // the validation (whose sync_dist logging is a collective per batch), instead of waiting forever.
  const std::string out = out_prefix("stream_uneven");
  const Outcome r = run(train(
      out, "--strategy ddp --devices 2 --stream 3 --samples 49 --batch 4 --steps -1 --epochs 2 --timeout 30"));
  ASSERT_EQ(r.code, 0) << r.output;
  const Result a = read_result(out + ".rank0"), b = read_result(out + ".rank1");
  EXPECT_EQ(a.fields.at("global_step"), "12");
  EXPECT_EQ(b.fields.at("global_step"), "12");
  const std::vector<int64_t> first = stream_ids_of(a);
  EXPECT_EQ(first.size(), 48u);
  EXPECT_EQ(std::count(first.begin(), first.end(), 48), 0) << "the unmatched tail batch is not trained on";
  EXPECT_EQ(a.params, b.params);
  EXPECT_TRUE(a.fields.count("metric val_loss")) << "validation ran to its agreed end";
}

// ---------------------------------------------------------------------------------------------
// strategy="fsdp" (src/strategies/fsdp_strategy.cpp): the same training as ddp with parameters,
// gradients and optimizer state sharded over the ranks.
namespace {

/// `strategy_flags` on `ranks` processes, batch 8 each, with `extra`: every rank's result.
std::vector<Result> job(const std::string& name, const std::string& strategy_flags, int ranks,
                        const std::string& extra) {
  const std::string out = out_prefix(name);
  const Outcome a = run(train(out, strategy_flags + " --devices " + std::to_string(ranks) + " --batch 8 " + extra +
                                       (ranks > 2 ? " --oversubscribe 1" : "")));
  EXPECT_EQ(a.code, 0) << a.output;
  std::vector<Result> r;
  for (int k = 0; k < ranks; ++k) r.push_back(read_result(out + ".rank" + std::to_string(k)));
  return r;
}

/// Every rank of `r` ends with the same weights, within 1e-5 of `reference`'s.
void expect_like(const std::vector<Result>& r, const Result& reference, double tolerance = 1e-5) {
  ASSERT_FALSE(reference.params.empty());
  for (size_t k = 0; k < r.size(); ++k) {
    SCOPED_TRACE("rank " + std::to_string(k));
    EXPECT_EQ(r[k].params, r[0].params) << "the ranks disagree";
    EXPECT_LE(max_abs_diff(r[k].params, reference.params), tolerance);
    EXPECT_EQ(r[k].fields.at("global_step"), reference.fields.at("global_step"));
  }
}

/// ddp and fsdp (`fsdp_flags`) on 2 ranks with `flags` (with --evaluate 1): fsdp's weights are ddp's, and so are
/// validate's loss and predict's sum after fit. Returns fsdp's results.
std::vector<Result> expect_ddps_results(const std::string& name, const std::string& fsdp_flags,
                                        const std::string& flags) {
  const auto d = job(name + "_ref", "--strategy ddp", 2, flags);
  const auto f = job(name, fsdp_flags, 2, flags);
  expect_like(f, d[0]);
  EXPECT_EQ(f[0].fields.at("validated_val_loss"), d[0].fields.at("validated_val_loss"));
  EXPECT_EQ(f[0].fields.at("predicted_sum"), d[0].fields.at("predicted_sum"));
  return f;
}

/// fsdp on 2 ranks with `flags` for 30 steps over 320 samples, stopped by SIGTERM at step 13 with a sharded
/// checkpoint, then resumed from it: the uninterrupted run's weights, bit for bit.
void expect_exact_sharded_resume(const std::string& name, const std::string& flags) {
  const std::string root = out_prefix(name);
  const std::string common = "--steps 30 --samples 320 --state-dict-type sharded " + flags + " ";
  const auto whole_run = job(name + "_full", "--strategy fsdp", 2, common + "--root " + root + "_a");
  job(name + "_part", "--strategy fsdp", 2, common + "--root " + root + "_b --interrupt-step 13");
  const auto resumed = job(name + "_resumed", "--strategy fsdp", 2,
                           common + "--root " + root + "_b --ckpt " + root + "_b/checkpoints/interrupted.ckpt");
  EXPECT_EQ(resumed[0].params, whole_run[0].params);
  EXPECT_EQ(resumed[0].fields.at("global_step"), "30");
}

bool python_has_torch() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

}  // namespace

TEST(FSDPStrategy, FullShardAndShardGradOpTrainToDdpsWeightsWithSgdAndWithAdamAndClipping) {
  for (const std::string opt : {"--optimizer sgd", "--optimizer adam --clip 0.5"}) {
    SCOPED_TRACE(opt);
    const std::string steps = "--steps 20 --shuffle 1 " + opt;
    const auto ddp = job("fsdp_ref", "--strategy ddp", 2, steps);
    expect_like(job("fsdp_full", "--strategy fsdp", 2, steps), ddp[0]);
    expect_like(job("fsdp_grad_op", "--strategy fsdp --fsdp-sharding shard_grad_op", 2, steps), ddp[0]);
    // NO_SHARD is ddp's own Reducer: the same floats.
    const auto none = job("fsdp_none", "--strategy fsdp --fsdp-sharding NO_SHARD", 2, steps);
    EXPECT_EQ(none[0].params, ddp[0].params);
  }
  // The check can fail: another learning rate's weights are far from these.
  const auto other = job("fsdp_other", "--strategy fsdp", 2, "--steps 20 --shuffle 1 --optimizer adam");
  const auto clipped = job("fsdp_clipped", "--strategy fsdp", 2, "--steps 20 --shuffle 1 --optimizer adam --clip 0.5");
  EXPECT_GT(max_abs_diff(other[0].params, clipped[0].params), 1e-4) << "clipping at 0.5 changes the weights";
}

// Each rank steps its pieces with LibTorch's own optimizers, built by configure_optimizers after the sharding;
// a StepLR halves the rate every 5 steps.
TEST(FSDPStrategy, AdamWRmspropAdagradAndNesterovMomentumWithAStepLRTrainToDdpsWeights) {
  for (const std::string opt : {"adamw", "rmsprop", "adagrad", "momentum"}) {
    SCOPED_TRACE(opt);
    const std::string steps = "--steps 20 --shuffle 1 --optimizer " + opt;
    const auto ddp = job("fsdp_opt_ref_" + opt, "--strategy ddp", 2, steps);
    expect_like(job("fsdp_opt_" + opt, "--strategy fsdp", 2, steps), ddp[0]);
  }
}

// Callbacks that average the weights see the pieces between steps (evaluation steps re-shard after their
// forward) and average them element-wise: the same floats as ddp's, and validate/predict after fit agree too.
TEST(FSDPStrategy, EmaAndSwaCallbacksValidateAndPredictGiveDdpsResults) {
  const std::string ema = "--steps 40 --epochs 2 --samples 320 --ema 0.9 --evaluate 1";
  expect_ddps_results("fsdp_ema", "--strategy fsdp", ema);
  const std::string swa = "--steps -1 --epochs 3 --samples 160 --swa 2";
  expect_like(job("fsdp_swa", "--strategy fsdp --fsdp-sharding shard_grad_op", 2, swa),
              job("fsdp_swa_ref", "--strategy ddp", 2, swa)[0]);
}

// bf16-mixed: float32 parameters and optimizer state, autocast forward, gradients reduce-scattered as bfloat16
// (half the bytes). Under CPU autocast the weight gradients come out of bfloat16 matrix products, so they are
// bfloat16 values already and the transport loses nothing: the weights are ddp's (measured: equal).
TEST(FSDPStrategy, Bf16MixedReducesInBfloat16AndTrainsToDdpsWeights) {
  const std::string flags = "--steps 20 --shuffle 1 --precision bf16-mixed --optimizer adam";
  const auto d = job("fsdp_bf16_ref", "--strategy ddp", 2, flags);
  const auto f = job("fsdp_bf16", "--strategy fsdp", 2, flags);
  expect_like(f, d[0]);
  const auto fp32 = job("fsdp_bf16_fp32", "--strategy fsdp", 2, "--steps 20 --shuffle 1 --optimizer adam");
  EXPECT_GT(max_abs_diff(f[0].params, fp32[0].params), 1e-4) << "bf16-mixed must compute in bfloat16";
}

TEST(FSDPStrategy, GradientAccumulationReducesOnlyAtTheLastMicroBatchAndMatchesDdp) {
  const std::string steps = "--steps 12 --accumulate 3 --optimizer adam";
  const auto ddp = job("fsdp_acc_ref", "--strategy ddp", 2, steps);
  expect_like(job("fsdp_acc_full", "--strategy fsdp", 2, steps), ddp[0]);
  expect_like(job("fsdp_acc_grad_op", "--strategy fsdp --fsdp-sharding SHARD_GRAD_OP", 2, steps), ddp[0]);
  const auto every = job("fsdp_acc_none", "--strategy fsdp", 2, "--steps 12 --optimizer adam");
  EXPECT_GT(max_abs_diff(every[0].params, ddp[0].params), 1e-4) << "accumulation must change the result";
}

// 161 parameters over 3 ranks: fc1.weight 128 = 3 x 43 - 1, fc1.bias 16 = 3 x 6 - 2, fc2.weight 16,
// fc2.bias 1 = 3 x 1 - 2: every piece but the first is padded, and each Linear is a unit of its own.
TEST(FSDPStrategy, ThreeRanksWithPiecesThatDoNotDivideEvenlyMatchDdp) {
  const std::string steps = "--steps 20 --optimizer adam --shuffle 1";
  const auto ddp = job("fsdp3_ref", "--strategy ddp", 3, steps);
  const auto full = job("fsdp3_full", "--strategy fsdp --wrap class:Linear", 3, steps);
  expect_like(full, ddp[0]);
  // Each Linear unit's reduce-scatter starts inside the backward, as soon as its gradients are accumulated
  // (fc2's before fc1's backward runs), not after it: two units a step, 20 steps.
  for (const auto& r : full) EXPECT_EQ(r.fields.at("fsdp_reduce_scatters_in_backward"), "40");
  expect_like(job("fsdp3_size", "--strategy fsdp --fsdp-sharding shard_grad_op --wrap size:100", 3, steps), ddp[0]);
}

// --wrapped 4: fc1 (8x16+16 = 144 elements), mid0..mid3 (16x16+16 = 272 each) and fc2 (16+1, padded to 18 on
// 2 ranks) are volt::Sharded units, 1250 elements in all. Under FULL_SHARD each is gathered just before its
// forward, freed after it, gathered again before its backward (from a hook on its output) and freed once its
// gradients are in: 6 units x 20 steps of each, and never more than two units whole at once.
TEST(FSDPStrategy, WrappedUnitsAreGatheredJustBeforeTheirForwardAndBackwardAndFreedAfterEach) {
  const std::string steps = "--steps 20 --shuffle 1 --optimizer adam --wrapped 4";
  const auto ddp = job("fsdp_wrapped_ref", "--strategy ddp", 2, steps);
  const auto full = job("fsdp_wrapped_full", "--strategy fsdp", 2, steps);
  expect_like(full, ddp[0]);
  for (const auto& r : full) {
    EXPECT_EQ(r.fields.at("fsdp_gathered_before_forward"), "120");
    EXPECT_EQ(r.fields.at("fsdp_freed_after_forward"), "120");
    EXPECT_EQ(r.fields.at("fsdp_gathered_before_backward"), "120");
    EXPECT_EQ(r.fields.at("fsdp_freed_after_backward"), "120");
    EXPECT_EQ(r.fields.at("fsdp_reduce_scatters_in_backward"), "120");
    const int64_t peak = std::stoll(r.fields.at("fsdp_peak_whole_elements"));
    EXPECT_GE(peak, 272);
    EXPECT_LE(peak, 2 * 272) << "at most two units whole at once, of 1250 elements";
  }
  // SHARD_GRAD_OP keeps whole parameters: the wrapped modules are ordinary units there.
  const auto grad_op = job("fsdp_wrapped_grad_op", "--strategy fsdp --fsdp-sharding shard_grad_op", 2, steps);
  expect_like(grad_op, ddp[0]);
  EXPECT_EQ(grad_op[0].fields.at("fsdp_gathered_before_forward"), "0");
  // Accumulating (no_sync): a unit keeps its whole parameters (and gradients) until the last micro-batch's
  // reduce-scatter, so the peak is the whole model; validate and predict after fit gather unit by unit.
  const std::string acc = "--steps 12 --accumulate 3 --optimizer adam --wrapped 4 --evaluate 1";
  EXPECT_EQ(expect_ddps_results("fsdp_wrapped_acc", "--strategy fsdp", acc)[0].fields.at("fsdp_peak_whole_elements"),
            "1250");
  // bf16-mixed (autocast casts each unit's whole weights while they are gathered).
  const std::string bf16 = "--steps 20 --shuffle 1 --optimizer adam --wrapped 4 --precision bf16-mixed";
  expect_like(job("fsdp_wrapped_bf16", "--strategy fsdp", 2, bf16), job("fsdp_wrapped_bf16_ref", "--strategy ddp", 2, bf16)[0]);
  // A sharded checkpoint written between steps (the units at rest, their storage released) resumes exactly.
  expect_exact_sharded_resume("fsdp_wrapped_ckpt", "--optimizer adam --wrapped 4");
}

// fsdp.cpu_offload: between steps each rank's pieces, their gradients and the optimizer state are host
// buffers of their own (never views of a gathered buffer), the optimizer steps them there, a gather copies
// them to the compute device and gives the same buffers back after, and the reduce-scattered gradient
// pieces are copied next to them. On this CPU-only machine host and compute device are the same memory, so
// what this shows is that bookkeeping: the weights stay ddp's under every sharding and unit kind, with
// accumulation and clipping, and a checkpoint resumes bit for bit.
TEST(FSDPStrategy, CpuOffloadTrainsToDdpsWeightsAndResumesExactly) {
  const std::string steps = "--steps 20 --shuffle 1 --optimizer adam --clip 0.5";
  const auto ddp = job("fsdp_offload_ref", "--strategy ddp", 2, steps);
  expect_like(job("fsdp_offload_full", "--strategy fsdp --cpu-offload 1", 2, steps), ddp[0]);
  expect_like(job("fsdp_offload_grad_op", "--strategy fsdp --fsdp-sharding shard_grad_op --cpu-offload 1", 2, steps),
              ddp[0]);
  expect_like(job("fsdp_offload_units", "--strategy fsdp --wrap class:Linear --cpu-offload 1", 2, steps), ddp[0]);
  const std::string wrapped = "--steps 20 --shuffle 1 --optimizer adam --wrapped 4";
  const auto w = job("fsdp_offload_wrapped", "--strategy fsdp --cpu-offload 1", 2, wrapped);
  expect_like(w, job("fsdp_offload_wrapped_ref", "--strategy ddp", 2, wrapped)[0]);
  EXPECT_EQ(w[0].fields.at("fsdp_gathered_before_backward"), "120") << "offloaded units are still gathered per unit";
  const std::string acc = "--steps 12 --accumulate 3 --optimizer momentum --evaluate 1";
  expect_ddps_results("fsdp_offload_acc", "--strategy fsdp --cpu-offload 1", acc);
  expect_exact_sharded_resume("fsdp_offload_ckpt", "--optimizer adam --cpu-offload 1");
  // An FSDPStrategy object (Lightning's FSDPStrategy(cpu_offload=True)) on 2 ranks, and on one process, where
  // its pieces are whole (strategy="fsdp" refuses one process): what the CUDA test runs on one GPU.
  expect_like(job("fsdp_offload_object", "--fsdp-object 1 --cpu-offload 1", 2, steps), ddp[0]);
  const std::string one = "--steps 20 --shuffle 1 --optimizer adam --clip 0.5 --batch 16";
  const std::string single = out_prefix("fsdp_offload_single"), object = out_prefix("fsdp_offload_object1");
  ASSERT_EQ(run(train(single, "--strategy single_device --devices 1 " + one)).code, 0);
  const Outcome o1 = run(train(object, "--fsdp-object 1 --cpu-offload 1 --devices 1 " + one));
  ASSERT_EQ(o1.code, 0) << o1.output;
  EXPECT_LE(max_abs_diff(read_result(object + ".rank0").params, read_result(single + ".rank0").params), 1e-6);
}

/// fsdp on 2 ranks, 30 steps of Adam over 320 samples, stopped by SIGTERM (sent in the 14th step's
/// training_step, so the 15th step's vote carries it: a checkpoint of `type` at step 15), then resumed: by fsdp on 2 ranks (bitwise), by one process with twice the batch (the
/// same data per step, so within 1e-5), and by fsdp on 3 ranks (it continues to step 30).
void check_fsdp_resume(const std::string& type) {
  const std::string root = out_prefix("fsdp_ckpt_" + type);
  const std::string common = "--steps 30 --samples 320 --optimizer adam --state-dict-type " + type + " ";
  const auto full = job("fsdp_ckpt_full_" + type, "--strategy fsdp", 2, common + "--root " + root + "_a");
  const auto part = job("fsdp_ckpt_part_" + type, "--strategy fsdp", 2, common + "--root " + root + "_b --interrupt-step 13");
  EXPECT_NE(part[0].fields.at("global_step"), "30");
  const std::string ckpt = root + "_b/checkpoints/interrupted.ckpt";
  ASSERT_TRUE(fs::exists(ckpt));
  EXPECT_EQ(fs::is_directory(ckpt), type == "sharded");
  if (type == "sharded") {
    EXPECT_TRUE(fs::exists(ckpt + "/meta.json") && fs::exists(ckpt + "/rank0.ckpt") && fs::exists(ckpt + "/rank1.ckpt"));
  }
  const auto resumed = job("fsdp_ckpt_resumed_" + type, "--strategy fsdp", 2, common + "--root " + root + "_b --ckpt " + ckpt);
  EXPECT_EQ(resumed[0].params, full[0].params) << "the resume on 2 ranks is exact";
  EXPECT_EQ(resumed[1].params, full[0].params);
  const std::string one = out_prefix("fsdp_ckpt_one_" + type);
  const Outcome o = run(train(one, "--strategy single_device --devices 1 --batch 16 " + common + "--root " + root +
                                       "_b --ckpt " + ckpt));
  ASSERT_EQ(o.code, 0) << o.output;
  expect_like({read_result(one + ".rank0")}, full[0]);
  const auto three = job("fsdp_ckpt_three_" + type, "--strategy fsdp", 3, common + "--root " + root + "_b --ckpt " + ckpt);
  for (const auto& r : three) {
    EXPECT_EQ(r.fields.at("global_step"), "30");
    EXPECT_EQ(r.params, three[0].params);
  }
  EXPECT_LE(max_abs_diff(three[0].params, full[0].params), 0.05) << "3 ranks continue from the checkpoint's weights";
  EXPECT_GT(max_abs_diff(three[0].params, full[0].params), 0.0) << "with other batches (24 per step)";
}

TEST(FSDPStrategy, AFullCheckpointResumesExactlyOnTwoRanksAndLoadsInOneProcessOnThreeAndInPython) {
  check_fsdp_resume("full");
  if (!python_has_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch (python3-torch) is not installed";
  const std::string ckpt = out_prefix("fsdp_ckpt_full") + "_b/checkpoints/interrupted.ckpt";
  const Outcome py = run("/usr/bin/python3 -c \"import torch; c = torch.load('" + ckpt +
                         "', map_location='cpu'); s = c['state_dict']; o = c['optimizer_states'][0]['state']; "
                         "print('shapes', tuple(s['fc1.weight'].shape), tuple(s['fc2.bias'].shape), "
                         "tuple(o[0]['exp_avg'].shape), tuple(o[3]['exp_avg_sq'].shape), c['global_step'])\"");
  ASSERT_EQ(py.code, 0) << py.output;
  EXPECT_TRUE(volt::testing::contains(py.output, "shapes (16, 8) (1,) (16, 8) (1,) 15")) << py.output;
}

TEST(FSDPStrategy, AShardedCheckpointIsAFilePerRankThatResumesOnTwoRanksAndLoadsOnOneAndOnThree) {
  check_fsdp_resume("sharded");
  // A folder whose metadata was never written (a save that died) is refused, naming what is missing.
  const std::string ckpt = out_prefix("fsdp_ckpt_sharded") + "_b/checkpoints/interrupted.ckpt";
  fs::remove(ckpt + "/rank1.ckpt");
  const std::string out = out_prefix("fsdp_ckpt_missing");
  const Outcome r = run(train(out, "--strategy fsdp --devices 2 --steps 30 --samples 320 --optimizer adam --ckpt " + ckpt));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(volt::testing::contains(r.output, "rank 1's file")) << r.output;
}

// A failing fsdp run: no collective can be trusted, so OnExceptionCheckpoint has each rank write its own
// pieces, and the last to finish writes meta.json. Rank 1 throws at step 5; rank 0 fails in the
// reduce-scatter; the folder resumes on 2 ranks to the uninterrupted run's weights, bit for bit.
TEST(FSDPStrategy, OnExceptionCheckpointWritesEveryRanksPiecesWithoutACollectiveAndResumesExactly) {
  const std::string common = "--strategy fsdp --devices 2 --steps 20 --optimizer adam ";
  const std::string ckpt =
      check_on_exception_resume("fsdp_on_exception", common, [](const Outcome& a, const std::string& path) {
        EXPECT_TRUE(fs::is_directory(path)) << a.output;
        for (const char* f : {"/meta.json", "/rank0.ckpt", "/rank1.ckpt"}) {
          EXPECT_TRUE(fs::exists(path + f)) << f << a.output;
        }
      });
  // A folder whose save did not finish on every rank (no meta.json) is refused, naming the pieces there.
  fs::create_directories(ckpt);
  std::ofstream(ckpt + "/rank0.ckpt") << "piece";
  const Outcome u = run(train(out_prefix("fsdp_on_exception_unfinished"), common + "--ckpt " + ckpt));
  EXPECT_NE(u.code, 0) << u.output;
  EXPECT_TRUE(volt::testing::contains(u.output, "save did not finish: meta.json is missing")) << u.output;
  EXPECT_TRUE(volt::testing::contains(u.output, "pieces of rank 0 are there")) << u.output;
  fs::remove_all(ckpt);
}

// ModelCheckpoint(save_last) under fsdp with sharded checkpoints writes last.ckpt as a folder;
// fit(ckpt_path="last") finds it and resumes (an epoch is 20 steps: the first run ends one).
TEST(FSDPStrategy, CkptPathLastFindsAShardedLastCheckpointFolder) {
  const std::string root = out_prefix("fsdp_last_root");
  const std::string common = "--strategy fsdp --devices 2 --samples 320 --optimizer adam --state-dict-type sharded "
                             "--checkpoint 1 --save-last 1 --root " + root + " ";
  const std::string first = out_prefix("fsdp_last_first"), second = out_prefix("fsdp_last_second");
  const Outcome a = run(train(first, common + "--steps 20"));
  ASSERT_EQ(a.code, 0) << a.output;
  const std::string last = root + "/checkpoints/last.ckpt";
  ASSERT_TRUE(fs::exists(last + "/meta.json")) << a.output;
  const Outcome b = run(train(second, common + "--steps 30 --ckpt last"));
  ASSERT_EQ(b.code, 0) << b.output;
  // Training from scratch would end with the same weights: the warning tells the two apart.
  EXPECT_FALSE(volt::testing::contains(b.output, "there is no last checkpoint")) << b.output;
  const std::string full = out_prefix("fsdp_last_full");
  ASSERT_EQ(run(train(full, "--strategy fsdp --devices 2 --samples 320 --optimizer adam --steps 30")).code, 0);
  EXPECT_EQ(read_result(second + ".rank0").fields.at("global_step"), "30");
  EXPECT_EQ(read_result(second + ".rank0").params, read_result(full + ".rank0").params)
      << "ckpt_path=\"last\" did not resume from the sharded last.ckpt";
}

TEST(FSDPStrategy, BadSettingsAreRefusedBeforeAnyRankStarts) {
  const std::string out = out_prefix("fsdp_bad");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--strategy fsdp --devices 1", "strategy='fsdp' shards the model over several processes"},
      {"--strategy fsdp --devices 2 --fsdp-sharding HYBRID_SHARD", "fsdp.sharding_strategy='HYBRID_SHARD' is not known"},
      {"--strategy fsdp --devices 2 --wrap size:100000", "wraps none of the submodules"},
      {"--strategy fsdp --devices 2 --wrap class:Conv2d", "its submodule classes: Linear"},
      {"--strategy fsdp --devices 2 --wrap size:0", "'0' is not a whole number of at least 1"},
      {"--strategy fsdp --devices 2 --wrap layers", "is not a wrap policy"},
      {"--strategy fsdp --devices 2 --state-dict-type local", "fsdp.state_dict_type='local' is not known"},
      {"--strategy fsdp --devices 2 --fsdp-sharding NO_SHARD --cpu-offload 1", "NO_SHARD makes no pieces"},
  };
  for (const auto& [flags, message] : cases) {
    SCOPED_TRACE(flags);
    fs::remove(out + ".rank0");
    fs::remove(out + ".rank1");
    const Outcome r = run(train(out, flags + " --steps 2"));
    EXPECT_EQ(r.code, 3) << r.output;
    EXPECT_TRUE(volt::testing::contains(r.output, message)) << r.output;
    EXPECT_FALSE(fs::exists(out + ".rank1")) << "no rank may have started";
    EXPECT_FALSE(volt::testing::contains(r.output, "rank 1")) << r.output;
  }
  // LBFGS's line search needs the whole parameter vector: refused by name once the optimizers exist.
  const Outcome lbfgs = run(train(out, "--strategy fsdp --devices 2 --steps 2 --optimizer lbfgs"));
  EXPECT_EQ(lbfgs.code, 3) << lbfgs.output;
  EXPECT_TRUE(volt::testing::contains(lbfgs.output, "cannot step LBFGS")) << lbfgs.output;
}
