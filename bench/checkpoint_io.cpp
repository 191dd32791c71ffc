// Checkpoint save and load throughput for a large state (default 24 x 4M float32 = 100.7M
// parameters, 403 MB) through Volt's TorchCheckpointIO, against torch.save/torch.load from
// Debian's python3-torch run as a child process (bench/torch_save.py); rounds alternate
// Volt / Python. Both sides are timed twice for a save, on equal terms:
//   durable: Volt's save as it always runs (temporary file, fsync, rename, fsync of the folder) against
//            torch.save followed by os.fsync of the file;
//   no fsync: Volt's save with its fsyncs off (set_fsync_for_benchmark, only here) against torch.save alone.
// Loads: Volt's load_checkpoint (every record's CRC-32 checked) against torch.load (which checks none).
// The ratios printed are Volt's throughput over PyTorch's (above 1: Volt is faster). Then the time a training loop is
// blocked by one save: TorchCheckpointIO (the whole write) against AsyncCheckpointIO (the snapshot copy only), and how
// long the background write takes to finish.
//
//   checkpoint_io [--tensors N] [--numel M] [--rounds R] [--dir D] [--python PATH] [--no-python]
#include <unistd.h>

#include <ATen/Parallel.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "volt/checkpoint_io/async_checkpoint_io.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"
#include "volt/core/file_check.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int64_t tensors = 24;
  int64_t numel = 4194304;
  int64_t rounds = 5;
  std::string dir =
      (std::filesystem::temp_directory_path() / ("volt_bench_ckpt." + std::to_string(::getpid()))).string();
  std::string python = "/usr/bin/python3";
  bool with_python = true;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw volt::ConfigError(k + " needs a value");
      return argv[++i];
    };
    if (k == "--tensors")
      a.tensors = std::stoll(next());
    else if (k == "--numel")
      a.numel = std::stoll(next());
    else if (k == "--rounds")
      a.rounds = std::stoll(next());
    else if (k == "--dir")
      a.dir = next();
    else if (k == "--python")
      a.python = next();
    else if (k == "--no-python")
      a.with_python = false;
    else if (k == "--help" || k == "-h") {
      std::cout << "checkpoint_io [--tensors N] [--numel M] [--rounds R] [--dir D] [--python PATH] [--no-python]\n";
      std::exit(0);
    } else {
      throw volt::ConfigError("unknown argument '" + k + "'; see --help.");
    }
  }
  if (a.tensors < 1 || a.numel < 1 || a.rounds < 1) {
    throw volt::ConfigError("--tensors, --numel and --rounds must be positive.");
  }
  return a;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// One number out of the script's JSON line ("key": value).
double json_number(const std::string& line, const std::string& key) {
  const auto at = line.find("\"" + key + "\":");
  if (at == std::string::npos) throw volt::Error("torch_save.py printed no " + key + ": " + line);
  return std::stod(line.substr(at + key.size() + 3));
}

std::string run_python(const Args& a, const std::string& script, const std::string& path) {
  const std::string cmd = a.python + " " + script + " --tensors " + std::to_string(a.tensors) + " --numel " +
                          std::to_string(a.numel) + " --path " + path;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw volt::Error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  if (::pclose(pipe) != 0) throw volt::Error("'" + cmd + "' failed: " + out);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    at::set_num_threads(1);
    std::filesystem::create_directories(a.dir);
    const std::string script = std::string(VOLT_BENCH_DIR) + "/torch_save.py";
    if (a.with_python && !std::filesystem::exists(script)) {
      throw volt::ConfigError("bench script '" + script + "' not found; run from a source checkout or --no-python.");
    }

    volt::Checkpoint ckpt;
    for (int64_t i = 0; i < a.tensors; ++i) {
      ckpt.tensors["state_dict.layer" + std::to_string(i) + ".weight"] = at::randn({a.numel});
    }
    const double mb = static_cast<double>(a.tensors * a.numel * 4) / 1e6;
    std::cout << "state: " << a.tensors << " x " << a.numel << " float32 = " << a.tensors * a.numel / 1e6
              << "M parameters, " << mb << " MB; folder " << a.dir << "\n";

    volt::checkpoint_io::TorchCheckpointIO io;
    const std::string path = a.dir + "/volt.ckpt";
    std::vector<double> save, save_nofsync, load, py_save, py_save_fsync, py_load;
    std::string torch_version;
    for (int64_t r = 0; r < a.rounds; ++r) {
      auto volt_round = [&] {
        auto t0 = Clock::now();
        io.save_checkpoint(ckpt, path);
        save.push_back(seconds_since(t0));
        t0 = Clock::now();
        const auto back = io.load_checkpoint(path);
        load.push_back(seconds_since(t0));
        for (const auto& [key, t] : ckpt.tensors) {
          if (!back.tensors.at(key).equal(t)) throw volt::Error("round trip differs at " + key);
        }
        std::filesystem::remove(path);
        // The same save without its fsyncs, as torch.save writes.
        volt::checkpoint_io::set_fsync_for_benchmark(false);
        t0 = Clock::now();
        io.save_checkpoint(ckpt, path);
        save_nofsync.push_back(seconds_since(t0));
        volt::checkpoint_io::set_fsync_for_benchmark(true);
        std::filesystem::remove(path);
      };
      auto python_round = [&] {
        if (!a.with_python) return;
        const std::string line = run_python(a, script, a.dir + "/torch.pt");
        py_save.push_back(json_number(line, "save_s"));
        py_save_fsync.push_back(json_number(line, "save_fsync_s"));
        py_load.push_back(json_number(line, "load_s"));
        const auto v = line.find("\"torch\": \"");
        if (v != std::string::npos) torch_version = line.substr(v + 10, line.find('"', v + 10) - v - 10);
      };
      // A B / B A: neither side always runs on a warmer page cache.
      if (r % 2 == 0) {
        volt_round();
        python_round();
      } else {
        python_round();
        volt_round();
      }
      std::cout << "round " << r + 1 << "/" << a.rounds << ": volt save " << save.back() << " s (no fsync "
                << save_nofsync.back() << " s), load " << load.back() << " s";
      if (a.with_python)
        std::cout << "; torch.save " << py_save.back() << " s (+fsync " << py_save_fsync.back() << " s), torch.load "
                  << py_load.back() << " s";
      std::cout << std::endl;
    }
    std::printf("\nmedians over %lld rounds (MB/s = %.0f MB / seconds)\n", static_cast<long long>(a.rounds), mb);
    std::printf("  volt save (temp file, fsync, rename, fsync folder)  %.3f s  %7.0f MB/s\n", median(save),
                mb / median(save));
    std::printf("  volt save without fsync (benchmark only)           %.3f s  %7.0f MB/s\n", median(save_nofsync),
                mb / median(save_nofsync));
    std::printf("  volt load_checkpoint (CRC-32 of every record)      %.3f s  %7.0f MB/s\n", median(load),
                mb / median(load));
    if (a.with_python) {
      std::printf("  torch.save + os.fsync (python3-torch %s)        %.3f s  %7.0f MB/s\n", torch_version.c_str(),
                  median(py_save_fsync), mb / median(py_save_fsync));
      std::printf("  torch.save                                         %.3f s  %7.0f MB/s\n", median(py_save),
                  mb / median(py_save));
      std::printf("  torch.load                                         %.3f s  %7.0f MB/s\n", median(py_load),
                  mb / median(py_load));
      std::printf("\nthroughput ratio, volt / torch (medians; >= 1.0: volt is at least as fast)\n");
      std::printf("  save, both durable (volt fsync+rename vs torch.save+os.fsync)  %.2fx\n",
                  median(py_save_fsync) / median(save));
      std::printf("  save, neither fsyncs (volt no-fsync vs torch.save)             %.2fx\n",
                  median(py_save) / median(save_nofsync));
      std::printf("  load (volt with CRC check vs torch.load)                       %.2fx\n",
                  median(py_load) / median(load));
    }

    // The loop's view: how long save_checkpoint blocks the caller.
    std::vector<double> sync_block, async_block, async_total;
    for (int64_t r = 0; r < a.rounds; ++r) {
      auto t0 = Clock::now();
      io.save_checkpoint(ckpt, a.dir + "/sync.ckpt");
      sync_block.push_back(seconds_since(t0));
      volt::checkpoint_io::AsyncCheckpointIO async;
      t0 = Clock::now();
      async.save_checkpoint(ckpt, a.dir + "/async.ckpt");
      async_block.push_back(seconds_since(t0));
      async.wait();
      async_total.push_back(seconds_since(t0));
      std::cout << "blocking round " << r + 1 << "/" << a.rounds << ": sync " << sync_block.back() << " s, async "
                << async_block.back() << " s (write done after " << async_total.back() << " s)" << std::endl;
    }
    std::printf("\ntraining loop blocked by one save (median)\n");
    std::printf("  sync  (TorchCheckpointIO)  %.3f s\n", median(sync_block));
    std::printf("  async (AsyncCheckpointIO)  %.3f s  (background write finished after %.3f s)\n", median(async_block),
                median(async_total));
    { std::error_code ec_rm; volt::remove_tree(a.dir, ec_rm); }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "checkpoint_io: " << e.what() << "\n";
    return 1;
  }
}
