// `volt plot`: the curves of one or more runs' metrics.csv as a PNG or an SVG. Runs in the front
// end (no LibTorch). Every argument and path is checked, and every run read, before anything is
// written; the image is written to a temporary file, synced and renamed into place.
#include "plot_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "command_args.h"
#include "plot/figure.h"
#include "plot/render.h"
#include "plot/series.h"
#include "volt/core/error.h"
#include "volt/core/input_file.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"

namespace fs = std::filesystem;

namespace {

using volt::in_quotes;

constexpr const char* kPlotUsage =
    "usage: volt plot RUN_DIR... [--metrics a,b] [--out curves.png|curves.svg] [--title TEXT]\n"
    "                 [--width W] [--height H]\n"
    "Draws the curves of one or more runs from RUN_DIR/metrics.csv (Volt's CSV logger, as Lightning's):\n"
    "one panel per metric against step, the runs overlaid in distinct colours, validation points\n"
    "(metrics named val_*, and rows logged at validation) marked. nan and inf values leave gaps.\n"
    "RUN_DIR is a run's folder (out/fashion_mnist/lightning_logs/version_0), a .csv file, or a folder\n"
    "with runs below it (lightning_logs: every version_N in it).\n"
    "  --metrics a,b   the panels, in order (default: every metric with values but step and epoch)\n"
    "  --out FILE      .png (default curves.png) or .svg; written atomically, replacing FILE\n"
    "  --title TEXT    the figure's title (default: \"Training curves: RUN\")\n"
    "  --width W, --height H\n"
    "                  image size in pixels, 200 to 10000 (default: from the number of panels)\n";

constexpr int64_t kMinSize = 200;
constexpr int64_t kMaxSize = 10000;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split_metrics(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t b = name.find_first_not_of(" \t");
    const size_t e = name.find_last_not_of(" \t");
    name = b == std::string::npos ? "" : name.substr(b, e - b + 1);
    if (name.empty()) {
      throw volt::ConfigError("--metrics " + in_quotes(list) +
                              " has an empty name; give metric names separated by commas, e.g. "
                              "--metrics train_loss,val_loss.");
    }
    for (const auto& seen : out) {
      if (seen == name)
        throw volt::ConfigError("--metrics " + in_quotes(list) + " names " + in_quotes(name) + " twice.");
    }
    out.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int parse_size(const std::string& flag, const std::string& value) {
  const auto n = volt::numbers::parse_int(value, kMinSize, kMaxSize);
  if (!n) {
    throw volt::ConfigError(flag + " expects a number of pixels from " + std::to_string(kMinSize) + " to " +
                            std::to_string(kMaxSize) + ", got " + in_quotes(value) + ", which " + n.problem + ".");
  }
  return static_cast<int>(*n.value);
}

// The output's format from its name, and its folder checked: all before any run is read.
std::string check_output(const std::string& out) {
  if (out.empty()) throw volt::ConfigError("--out is empty; give a file name ending in .png or .svg.");
  const fs::path path(out);
  const std::string ext = lower(path.extension().string());
  if (ext != ".png" && ext != ".svg") {
    throw volt::ConfigError("--out " + in_quotes(out) + " must end in .png or .svg (the format is taken from it).");
  }
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    throw volt::ConfigError("--out " + in_quotes(out) + ": its folder " + in_quotes(dir.string()) + " " +
                            volt::input_file_problem(dir.string()) + ". Create the folder first, or write elsewhere.");
  }
  if (!S_ISDIR(st.st_mode)) {
    throw volt::ConfigError("--out " + in_quotes(out) + ": " + in_quotes(dir.string()) + " is " +
                            volt::stat_kind_text(st) + ", not a folder.");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw volt::ConfigError("--out " + in_quotes(out) + ": the folder " + in_quotes(dir.string()) +
                            " is not writable (" + std::strerror(errno) + "). Write elsewhere.");
  }
  if (::lstat(out.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw volt::ConfigError("--out " + in_quotes(out) + " is " + volt::stat_kind_text(st) +
                            "; volt plot replaces only a regular file. Give another name.");
  }
  return ext.substr(1);
}

void write_atomically(const std::string& out, const std::string& bytes) {
  const fs::path path(out);
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const fs::path tmp = dir / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()));
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    throw volt::Error("cannot " + what + " " + in_quotes(tmp.string()) + ": " + std::strerror(err) +
                      ". Nothing was written to " + in_quotes(out) + ".");
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw volt::Error("cannot create " + in_quotes(tmp.string()) + ": " + std::strerror(errno) + ".");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail("write", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("flush", err);
  }
  if (::close(fd) != 0) fail("close", errno);
  if (::rename(tmp.c_str(), out.c_str()) != 0) fail("rename onto " + in_quotes(out) + " the file", errno);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string size_text(size_t bytes) {
  char buf[32];
  if (bytes < 10240) {
    std::snprintf(buf, sizeof(buf), "%zu bytes", bytes);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f kB", bytes / 1000.0);
  }
  return buf;
}

}  // namespace

int cmd_plot(int argc, char** argv) {
  try {
    std::vector<std::string> run_dirs;
    volt::plot::FigureOptions options;
    std::string out = "curves.png";
    bool metrics_given = false;
    for (int i = 1; i < argc; ++i) {
      const volt::tools::CommandArg split = volt::tools::split_command_arg(argv[i]);
      std::string arg = split.name;
      const std::string& value = split.value;
      const bool has_value = split.has_value;
      auto next = [&]() -> std::string {
        if (has_value) return value;
        if (i + 1 >= argc) throw volt::ConfigError(arg + " needs a value.\n" + std::string(kPlotUsage));
        return argv[++i];
      };
      if (arg == "--help" || arg == "-h") {
        std::cout << kPlotUsage;
        return 0;
      } else if (arg == "--metrics") {
        if (metrics_given) throw volt::ConfigError("--metrics is given twice; list every metric in one --metrics a,b.");
        options.metrics = split_metrics(next());
        metrics_given = true;
      } else if (arg == "--out" || arg == "-o") {
        out = next();
      } else if (arg == "--title") {
        options.title = next();
      } else if (arg == "--width") {
        options.width = parse_size("--width", next());
      } else if (arg == "--height") {
        options.height = parse_size("--height", next());
      } else if (arg == "--") {
        for (++i; i < argc; ++i) run_dirs.emplace_back(argv[i]);
      } else if (arg.rfind("-", 0) == 0 && arg.size() > 1) {
        throw volt::ConfigError("unknown option " + in_quotes(arg) + ".\n" + std::string(kPlotUsage));
      } else {
        run_dirs.push_back(arg);
      }
    }
    if (run_dirs.empty()) {
      throw volt::ConfigError("volt plot needs at least one RUN_DIR (a run's folder holding metrics.csv).\n" +
                              std::string(kPlotUsage));
    }
    const std::string format = check_output(out);

    const std::vector<volt::plot::Run> runs = volt::plot::load_runs(run_dirs);
    for (const auto& run : runs) {
      size_t metrics = 0;
      for (const auto& s : run.series) metrics += s.points.empty() ? 0 : 1;
      std::cout << "volt plot: read " << volt::printable(run.source) << " (" << run.rows << " rows, " << metrics
                << (metrics == 1 ? " metric)\n" : " metrics)\n");
    }
    const volt::plot::Figure figure = volt::plot::layout(runs, options);
    const std::string bytes =
        format == "png" ? volt::plot::encode_png(volt::plot::rasterize(figure)) : volt::plot::render_svg(figure);
    write_atomically(out, bytes);
    std::string panels;
    for (const auto& m : figure.metrics) panels += (panels.empty() ? "" : ", ") + volt::printable(m);
    std::cout << "volt plot: wrote " << volt::printable(out) << " (" << figure.width << "x" << figure.height << " "
              << (format == "png" ? "PNG" : "SVG") << ", " << size_text(bytes.size()) << "): " << runs.size()
              << (runs.size() == 1 ? " run, " : " runs, ") << figure.metrics.size()
              << (figure.metrics.size() == 1 ? " panel (" : " panels (") << panels << ")\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "volt plot: " << e.what() << "\n";
    return 2;
  }
}
