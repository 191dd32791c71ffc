#include "volt/data/image/image_folder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/scalar_tensor.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <system_error>

#include "volt/core/error.h"
#include "volt/core/file_check.h"

namespace volt::data {
namespace {

namespace fs = std::filesystem;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool has_extension(const std::string& name, const std::vector<std::string>& extensions) {
  for (const auto& ext : extensions) {
    if (name.size() < ext.size()) continue;
    bool same = true;
    for (size_t i = 0; i < ext.size() && same; ++i) {
      const char c = name[name.size() - ext.size() + i];
      same = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) == ext[i];
    }
    if (same) return true;
  }
  return false;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i > 0 ? sep : "") + v[i];
  return out;
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);  // follows links, as os.DirEntry.is_dir() does
}

// os.walk(dir, followlinks=True): every folder below `dir` (itself included) with the names of its
// entries that are not folders. A folder reached twice through links is walked once.
void walk(const fs::path& dir, std::vector<std::pair<std::string, std::vector<std::string>>>& out,
          std::set<std::pair<dev_t, ino_t>>& seen) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !seen.insert({st.st_dev, st.st_ino}).second) return;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    throw DataError("ImageFolder: the folder " + quote_path(dir.string()) + " cannot be read: " + ec.message() +
                    ". Check its permissions.");
  }
  std::vector<std::string> files;
  std::vector<fs::path> subdirs;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (is_dir(it->path())) {
      subdirs.push_back(it->path());
    } else {
      files.push_back(it->path().filename().string());
    }
  }
  out.emplace_back(dir.string(), std::move(files));
  for (const auto& sub : subdirs) walk(sub, out, seen);
}

bool print_warnings() {
  const char* rank = std::getenv("RANK");
  return rank == nullptr || std::string(rank) == "0";
}

}  // namespace

const std::vector<std::string>& image_extensions() {
  static const std::vector<std::string> kExtensions{".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                                    ".pgm", ".tif",  ".tiff", ".webp"};
  return kExtensions;
}

ImageFolder::ImageFolder(std::string root, ImageFolderOptions options)
    : root_(std::move(root)), options_(std::move(options)) {
  if (options_.extensions.empty()) {
    throw ConfigError(
        "ImageFolder: extensions is empty, so no file would count as an image. Leave it at "
        "image_extensions() or list endings such as \".jpg\".");
  }
  for (auto& ext : options_.extensions) {
    if (ext.empty()) throw ConfigError("ImageFolder: an empty extension would match every file; remove it.");
    for (auto& c : ext) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  if (const FileKind kind = file_kind(root_); kind != FileKind::kDirectory) {
    throw DataError("ImageFolder: the root " + quote_path(root_) +
                    (kind == FileKind::kMissing ? std::string(" does not exist")
                                                : std::string(" is ") + describe(kind) + ", not a folder") +
                    ". Give a folder with one subfolder of images per class (root/<class>/<image>).");
  }
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (is_dir(it->path())) classes_.push_back(it->path().filename().string());
  }
  if (ec) {
    throw DataError("ImageFolder: the root " + quote_path(root_) + " cannot be read: " + ec.message() + ".");
  }
  std::sort(classes_.begin(), classes_.end());
  if (classes_.empty()) {
    throw DataError("ImageFolder: found no class folder in " + quote_path(root_) +
                    ". Put each class's images in a subfolder of its own (root/<class>/<image>).");
  }
  for (size_t i = 0; i < classes_.size(); ++i) class_to_idx_[classes_[i]] = static_cast<int64_t>(i);

  std::vector<std::string> empty;
  for (const auto& cls : classes_) {
    const int64_t target = class_to_idx_[cls];
    std::vector<std::pair<std::string, std::vector<std::string>>> folders;
    std::set<std::pair<dev_t, ino_t>> seen;
    walk(fs::path(root_) / cls, folders, seen);
    std::sort(folders.begin(), folders.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const size_t before = samples_.size();
    for (auto& [dir, files] : folders) {
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        if (has_extension(f, options_.extensions)) samples_.emplace_back((fs::path(dir) / f).string(), target);
      }
    }
    if (samples_.size() == before) empty.push_back(cls);
  }
  if (!empty.empty()) {
    throw DataError("ImageFolder: found no image file for the classes " + join(empty, ", ") + " in " +
                    quote_path(root_) + ". Supported extensions are: " + join(options_.extensions, ", ") +
                    ". Add images to those folders or remove them.");
  }

  if (options_.skip_corrupt) {
    std::vector<std::pair<std::string, int64_t>> good;
    good.reserve(samples_.size());
    for (auto& s : samples_) {
      try {
        (void)read_image(s.first, options_.mode);
        good.push_back(std::move(s));
      } catch (const Error& e) {
        skipped_.emplace_back(s.first, e.what());
      }
    }
    samples_ = std::move(good);
    if (!skipped_.empty() && print_warnings()) {
      std::cerr << "[volt] warning: ImageFolder " << quote_path(root_) << " skips " << skipped_.size() << " of "
                << samples_.size() + skipped_.size() << " files that cannot be decoded (skip_corrupt), the first "
                << quote_path(skipped_.front().first) << "; skipped_files() lists them all.\n";
    }
    if (samples_.empty()) {
      throw DataError("ImageFolder: none of the " + std::to_string(skipped_.size()) + " image files in " +
                      quote_path(root_) + " can be decoded; the first: " + skipped_.front().second);
    }
  }
  seed_ = options_.seed ? *options_.seed : at::detail::getDefaultCPUGenerator().current_seed();
}

std::vector<int64_t> ImageFolder::targets() const {
  std::vector<int64_t> out;
  out.reserve(samples_.size());
  for (const auto& s : samples_) out.push_back(s.second);
  return out;
}

uint64_t ImageFolder::sample_seed(int64_t index) const {
  const uint64_t per_epoch = splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(epoch_.load())));
  return splitmix64(per_epoch ^ static_cast<uint64_t>(index));
}

Batch ImageFolder::get(int64_t index) const {
  if (index < 0 || index >= size()) {
    throw Error("ImageFolder: index " + std::to_string(index) + " is out of range for a folder of " +
                std::to_string(size()) + " images. Valid indices are 0.." + std::to_string(size() - 1) + ".");
  }
  const auto& [path, target] = samples_[static_cast<size_t>(index)];
  at::Tensor image;
  try {
    image = read_image(path, options_.mode);
  } catch (const Error& e) {
    throw DataError("ImageFolder sample " + std::to_string(index) + " (class '" +
                    classes_[static_cast<size_t>(target)] + "'): " + e.what());
  }
  if (options_.transform) {
    at::Generator gen = transforms::make_generator(sample_seed(index));
    image = (*options_.transform)(image, gen);
  }
  return {image, at::scalar_tensor(target, at::kLong)};
}

}  // namespace volt::data
