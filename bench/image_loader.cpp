// Images per second through decode + RandomResizedCrop(224) + RandomHorizontalFlip + Normalize +
// collate, on a folder of generated JPEGs: Volt's ImageFolder and DataLoader against torchvision's
// ImageFolder and torch's DataLoader (bench/image_loader.py under /usr/bin/python3), at the same
// worker counts, alternating in one run. Each side runs a warm-up epoch (Python's persistent workers
// are started in it), then `--epochs` timed ones; the median epoch of each side is compared.
//
// Also Volt's decode alone (read_image of every file, one thread), for the share decoding takes.
// Both sides use glibc's malloc as it is; --tune-malloc gives both the thresholds Volt's CPU
// accelerator sets in a Trainer run (mallopt here, GLIBC_TUNABLES for the Python child).
//
//   image_loader [--images N] [--workers 0,2] [--batch-size B] [--epochs E] [--rounds R]
//                [--dir D] [--python PATH] [--no-python] [--tune-malloc]
#include <malloc.h>
#include <unistd.h>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/stack.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/data/dataloader.h"
#include "volt/data/image/decode.h"
#include "volt/data/image/image_folder.h"
#include "volt/data/image/transforms.h"

namespace {

namespace fs = std::filesystem;
namespace T = volt::data::transforms;
using Clock = std::chrono::steady_clock;

struct Args {
  int64_t images = 512;
  std::vector<int64_t> workers{0, 2};
  int64_t batch_size = 32;
  int64_t epochs = 2;
  int64_t rounds = 2;
  std::string dir = (fs::temp_directory_path() / ("volt_bench_images." + std::to_string(::getpid()))).string();
  std::string python = "/usr/bin/python3";
  bool with_python = true;
  bool tune_malloc = false;
};

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw volt::ConfigError(k + " needs a value");
      return argv[++i];
    };
    if (k == "--images")
      a.images = std::stoll(next());
    else if (k == "--workers")
      a.workers = parse_list(next());
    else if (k == "--batch-size")
      a.batch_size = std::stoll(next());
    else if (k == "--epochs")
      a.epochs = std::stoll(next());
    else if (k == "--rounds")
      a.rounds = std::stoll(next());
    else if (k == "--dir")
      a.dir = next();
    else if (k == "--python")
      a.python = next();
    else if (k == "--no-python")
      a.with_python = false;
    else if (k == "--tune-malloc")
      a.tune_malloc = true;
    else if (k == "--help" || k == "-h") {
      std::cout << "image_loader [--images N] [--workers 0,2] [--batch-size B] [--epochs E] [--rounds R] [--dir D]\n"
                   "             [--python PATH] [--no-python] [--tune-malloc]\n";
      std::exit(0);
    } else {
      throw volt::ConfigError("unknown argument '" + k + "'; see --help.");
    }
  }
  if (a.images < 1 || a.batch_size < 1 || a.epochs < 1 || a.rounds < 1 || a.workers.empty()) {
    throw volt::ConfigError("--images, --batch-size, --epochs and --rounds must be >= 1 and --workers non-empty.");
  }
  return a;
}

// Photo-like JPEGs of ImageNet-like sizes (about 500 x 375, varied): gradients, blocks and noise.
void make_folder(const Args& a) {
  at::manual_seed(0);
  for (int64_t i = 0; i < a.images; ++i) {
    const int64_t h = 300 + (i * 37) % 160, w = 400 + (i * 53) % 140;
    const at::Tensor x = at::arange(w, at::kInt).view({1, w}).expand({h, w});
    const at::Tensor y = at::arange(h, at::kInt).view({h, 1}).expand({h, w});
    const at::Tensor blocks = ((x / 40 + y / 30 + i) % 5) * 30;
    at::Tensor img = at::stack({x * 255 / w, y * 255 / h, blocks}, 2) + at::randint(-12, 13, {h, w, 3}, at::kInt);
    const fs::path dir = fs::path(a.dir) / ("class" + std::to_string(i % 4));
    fs::create_directories(dir);
    volt::data::write_jpeg((dir / (std::to_string(i) + ".jpg")).string(), img.clamp(0, 255).to(at::kByte), 90);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Seconds per timed epoch, after one warm-up epoch.
std::vector<double> volt_epochs(const Args& a, int64_t workers) {
  volt::data::ImageFolderOptions opts;
  opts.seed = 0;
  opts.transform = std::make_shared<T::Compose>(
      std::vector<T::TransformPtr>{std::make_shared<T::RandomResizedCrop>(std::vector<int64_t>{224}),
                                   std::make_shared<T::RandomHorizontalFlip>(), std::make_shared<T::ToTensor>(),
                                   std::make_shared<T::Normalize>(std::vector<double>{0.485, 0.456, 0.406},
                                                                  std::vector<double>{0.229, 0.224, 0.225})});
  auto folder = std::make_shared<volt::data::ImageFolder>(a.dir, opts);
  volt::data::DataLoaderOptions lo;
  lo.batch_size = a.batch_size;
  lo.shuffle = true;
  lo.seed = 0;
  lo.num_workers = workers;
  volt::data::DataLoader loader(folder, lo);
  std::vector<double> out;
  for (int64_t e = 0; e <= a.epochs; ++e) {
    folder->set_epoch(e);
    loader.set_epoch(e);
    const auto start = Clock::now();
    int64_t n = 0;
    auto stream = loader.stream();
    while (auto batch = stream->next()) n += (*batch)[0].size(0);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (n != folder->size()) throw volt::Error("Volt's loader gave " + std::to_string(n) + " images");
    if (e > 0) out.push_back(s);
  }
  return out;
}

// Seconds to decode every file once.
double decode_only(const Args& a) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(a.dir)) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  const auto start = Clock::now();
  for (const auto& f : files) (void)volt::data::read_image(f);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<double> python_epochs(const Args& a, int64_t workers, const std::string& script) {
  const std::string env =
      a.tune_malloc ? "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824 "
                    : "";
  const std::string cmd = env + a.python + " '" + script + "' '" + a.dir + "' --workers " + std::to_string(workers) +
                          " --batch-size " + std::to_string(a.batch_size) + " --epochs " + std::to_string(a.epochs + 1);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw volt::Error("cannot run " + cmd);
  std::vector<double> out;
  char line[512];
  int epoch = 0;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    const char* s = std::strstr(line, "\"seconds\": ");
    if (s == nullptr) continue;
    if (epoch++ > 0) out.push_back(std::atof(s + 11));
  }
  if (::pclose(pipe) != 0 || out.empty()) throw volt::Error(cmd + " failed");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    at::set_num_threads(1);
    if (a.tune_malloc) {
      mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
      mallopt(M_TRIM_THRESHOLD, 1 << 30);
    }
    const std::string script = fs::path(VOLT_BENCH_DIR) / "image_loader.py";
    std::cout << "generating " << a.images << " JPEGs (about 500 x 375, quality 90) in " << a.dir << "\n";
    make_folder(a);
    std::map<int64_t, std::vector<double>> volt_s, py_s;
    std::vector<double> decode_s;
    for (int64_t r = 0; r < a.rounds; ++r) {
      decode_s.push_back(decode_only(a));
      for (const int64_t w : a.workers) {
        for (double s : volt_epochs(a, w)) volt_s[w].push_back(s);
        if (a.with_python) {
          for (double s : python_epochs(a, w, script)) py_s[w].push_back(s);
        }
      }
    }
    std::printf("%-8s %14s %18s %8s\n", "workers", "Volt images/s", "torchvision img/s", "ratio");
    for (const int64_t w : a.workers) {
      const double v = static_cast<double>(a.images) / median(volt_s[w]);
      if (a.with_python) {
        const double p = static_cast<double>(a.images) / median(py_s[w]);
        std::printf("%-8lld %14.1f %18.1f %7.2fx\n", static_cast<long long>(w), v, p, v / p);
      } else {
        std::printf("%-8lld %14.1f %18s %8s\n", static_cast<long long>(w), v, "-", "-");
      }
    }
    std::printf("Volt decode only (read_image, 1 thread): %.1f images/s\n",
                static_cast<double>(a.images) / median(decode_s));
    std::printf("malloc: glibc, %s\n", a.tune_malloc ? "mmap/trim thresholds raised on both sides" : "defaults");
    std::error_code ec;
    volt::remove_tree(a.dir, ec);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "image_loader: " << e.what() << "\n";
    return 1;
  }
}
