// fsdp's reduce-scatter of gradients against an allreduce of them, on Gloo between 2 processes of this
// machine (loopback, 1 Gloo thread and 1 intra-op thread per process, as Volt's ddp/fsdp run).
//   allreduce     : the whole gradient of N floats summed on every rank (what ddp does; a rank would
//                   then keep its N/2)
//   alltoall+sum  : each rank sends the other its half and sums the two halves it holds: what
//                   strategy="fsdp" does (Gloo has no reduce_scatter in LibTorch 1.13 or 2.6)
//   reduce_scatter: Gloo's own, where this LibTorch has one; otherwise the reason is printed
// Every operation is checked: each rank's piece must equal the allreduce's sum there, bit for bit.
// Each size runs --iters times per operation, the operations alternating, a barrier before each;
// medians are reported, with each operation's time as a ratio to the allreduce's.
//   build/bench/reduce_scatter [--sizes 262144,1048576,4194304,16777216] [--iters 15]
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#if __has_include(<gloo/algorithm.h>)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define VOLT_BENCH_HAS_GLOO 1
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "volt/core/file_check.h"

#ifndef VOLT_BENCH_HAS_GLOO
int main() {
  std::printf("reduce_scatter: this LibTorch has no Gloo headers (a pip PyTorch ships none): nothing to measure\n");
  return 0;
}
#else
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1.0 : v[v.size() / 2];
}

template <typename F>
double timed_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// One rank's part: returns 0 when every piece agreed with the allreduce.
int run_rank(int rank, const std::string& store_path, const std::vector<int64_t>& sizes, int iters) {
  at::set_num_threads(1);
  auto store = c10::make_intrusive<c10d::FileStore>(store_path, 2);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  options->threads = 1;
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, 2, options);
  auto barrier = [&] {
    std::vector<at::Tensor> t{at::zeros({1})};
    pg->allreduce(t)->wait();
  };
  int bad = 0;
  if (rank == 0) {
    std::printf("fsdp's reduce-scatter against allreduce: Gloo, 2 processes on loopback, 1 thread each, median of %d\n",
                iters);
    std::printf("%12s %10s %14s %8s %10s %16s %8s\n", "floats", "allreduce", "alltoall+sum", "x", "(the sum)",
                "reduce_scatter", "x");
  }
  for (const int64_t n : sizes) {
    const int64_t half = n / 2;
    // Different values on the two ranks, the same every iteration.
    const at::Tensor grad = at::arange(n, at::kFloat).mul_(rank == 0 ? 0.37 : -1.21).sin_();
    std::map<std::string, std::vector<double>> ms;
    std::string rs_note;
    for (int it = 0; it < iters; ++it) {
      at::Tensor summed = grad.clone();
      barrier();
      ms["allreduce"].push_back(timed_ms([&] {
        std::vector<at::Tensor> t{summed};
        pg->allreduce(t)->wait();
      }));
      const at::Tensor expected = summed.narrow(0, rank * half, half);
      at::Tensor in = grad.view({2, half}).clone(), out = at::empty({2, half});
      at::Tensor mine;
      barrier();
      double sum_ms = 0;
      ms["alltoall"].push_back(timed_ms([&] {
        std::vector<int64_t> splits;
        pg->alltoall_base(out, in, splits, splits)->wait();
        // Row r came from rank r, in rank order: the same order of addition as the allreduce's.
        sum_ms = timed_ms([&] { mine = out[0].add(out[1]); });
      }));
      ms["sum"].push_back(sum_ms);
      if (!mine.equal(expected)) bad = 1;
      if (rs_note.empty()) {
        std::vector<at::Tensor> outs{at::empty({half})};
        std::vector<std::vector<at::Tensor>> ins{{grad.narrow(0, 0, half).clone(), grad.narrow(0, half, half).clone()}};
        barrier();
        try {
          const double t = timed_ms([&] { pg->reduce_scatter(outs, ins)->wait(); });
          ms["reduce_scatter"].push_back(t);
          if (!outs[0].equal(expected)) bad = 1;
        } catch (const std::exception& e) {
          std::string what = e.what();
          rs_note = what.substr(0, what.find('\n'));
        }
      }
    }
    if (rank == 0) {
      const double ar = median(ms["allreduce"]), a2a = median(ms["alltoall"]);
      std::ostringstream rs;
      if (ms.count("reduce_scatter")) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%13.3f ms %8.3f", median(ms["reduce_scatter"]), median(ms["reduce_scatter"]) / ar);
        rs << buf;
      } else {
        rs << "  n/a (" << rs_note << ")";
      }
      std::printf("%12lld %7.3f ms %11.3f ms %8.3f %7.3f ms %s\n", static_cast<long long>(n), ar, a2a, a2a / ar,
                  median(ms["sum"]), rs.str().c_str());
      std::fflush(stdout);
    }
  }
  barrier();
  if (bad) std::fprintf(stderr, "reduce_scatter bench: rank %d: a piece differs from the allreduce's sum\n", rank);
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes{262144, 1048576, 4194304, 16777216};
  int iters = 15;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc || (key != "--sizes" && key != "--iters")) {
      std::fprintf(stderr, "usage: reduce_scatter [--sizes N,N,...] [--iters K]   (got '%s')\n", key.c_str());
      return 2;
    }
    const std::string value = argv[i + 1];
    try {
      if (key == "--iters") {
        iters = std::stoi(value);
      } else {
        sizes.clear();
        std::stringstream in(value);
        std::string item;
        while (std::getline(in, item, ',')) sizes.push_back(std::stoll(item));
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "reduce_scatter: %s '%s' is not a number (or list of numbers)\n", key.c_str(), value.c_str());
      return 2;
    }
  }
  for (const int64_t n : sizes) {
    if (n < 2 || n % 2 != 0) {
      std::fprintf(stderr, "reduce_scatter: --sizes takes even numbers of at least 2 (got %lld)\n", static_cast<long long>(n));
      return 2;
    }
  }
  if (iters < 1) {
    std::fprintf(stderr, "reduce_scatter: --iters must be at least 1 (got %d)\n", iters);
    return 2;
  }
  char dir_template[] = "/tmp/volt_reduce_scatter_XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    std::perror("reduce_scatter: mkdtemp");
    return 1;
  }
  const std::string dir = dir_template;
  const std::string store = dir + "/store";
  std::fflush(stdout);
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("reduce_scatter: fork");
    return 1;
  }
  if (child == 0) {
    int code = 1;
    try {
      code = run_rank(1, store, sizes, iters);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reduce_scatter: rank 1: %s\n", e.what());
    }
    std::fflush(stdout);
    ::_exit(code);
  }
  int code = 1;
  try {
    code = run_rank(0, store, sizes, iters);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reduce_scatter: rank 0: %s\n", e.what());
    ::kill(child, SIGKILL);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  std::error_code ec;
  volt::remove_tree(dir, ec);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "reduce_scatter: rank 1 failed (status %d)\n", status);
    return 1;
  }
  return code;
}
#endif  // VOLT_BENCH_HAS_GLOO
