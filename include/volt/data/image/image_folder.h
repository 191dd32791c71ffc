#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "volt/data/dataset.h"
#include "volt/data/image/decode.h"
#include "volt/data/image/transforms.h"

namespace volt::data {

/// torchvision's IMG_EXTENSIONS: .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp (matched
/// case-insensitively at the end of the file name). Volt decodes the JPEG and PNG ones; a file of
/// another format found by them is reported as undecodable when it is loaded.
const std::vector<std::string>& image_extensions();

struct ImageFolderOptions {
  /// Decoded as RGB (3 channels) or L (1 channel).
  ImageMode mode = ImageMode::kRGB;
  /// Applied to each decoded uint8 [H, W, C] image; unset: the image is returned as decoded.
  transforms::TransformPtr transform;
  /// File name endings that count as images, lower case; default image_extensions().
  std::vector<std::string> extensions = image_extensions();
  /// false: a file that cannot be decoded fails the sample that loads it (DataError naming the
  /// file). true: every file is decoded once at construction and those that fail are left out,
  /// counted in skipped() and listed by skipped_files(), with one warning.
  bool skip_corrupt = false;
  /// Seeds the random transforms: sample i of epoch e draws from a generator seeded with
  /// sample_seed(i), a function of (seed, epoch, i) only, so any worker count gives the same
  /// images. Unset: LibTorch's default CPU generator's seed at construction (seed_everything
  /// fixes it), as the DataLoader's shuffle takes it.
  std::optional<uint64_t> seed;
};

/// A folder of images in one subfolder per class, `root/<class>/**/<file>` (torchvision's
/// ImageFolder): classes are the subfolder names sorted as strings (byte order), class i has
/// target i; samples are ordered class by class, then by folder path and file name, as
/// torchvision's make_dataset orders them (folders below a class folder are walked too, links
/// followed). An example is {image, target}: the transformed image and an int64 scalar.
///
/// Throws DataError (naming the folder) when root is not a folder, has no class folder, or a
/// class folder holds no file with one of the extensions (listing those classes), as torchvision
/// refuses them.
class ImageFolder : public Dataset {
 public:
  explicit ImageFolder(std::string root, ImageFolderOptions options = {});

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  /// Decodes and transforms sample `index` (thread-safe; the loader's workers call it). A file
  /// that cannot be decoded is a DataError naming the sample, its class and the file.
  Batch get(int64_t index) const override;

  /// The class names, sorted.
  const std::vector<std::string>& classes() const { return classes_; }
  const std::map<std::string, int64_t>& class_to_idx() const { return class_to_idx_; }
  /// (path, target) per sample, in order.
  const std::vector<std::pair<std::string, int64_t>>& samples() const { return samples_; }
  std::vector<int64_t> targets() const;
  const std::string& root() const { return root_; }

  /// The epoch whose augmentations get() draws. The DataLoader calls it before each pass
  /// (Dataset::set_epoch), so every epoch gets fresh crops.
  void set_epoch(int64_t epoch) const override { epoch_.store(epoch); }
  int64_t epoch() const { return epoch_.load(); }
  uint64_t seed() const { return seed_; }
  /// The seed of sample `index`'s generator in the current epoch.
  uint64_t sample_seed(int64_t index) const;

  /// Files left out by skip_corrupt, with the reason each was refused.
  const std::vector<std::pair<std::string, std::string>>& skipped_files() const { return skipped_; }
  int64_t skipped() const { return static_cast<int64_t>(skipped_.size()); }

 private:
  std::string root_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::map<std::string, int64_t> class_to_idx_;
  std::vector<std::pair<std::string, int64_t>> samples_;
  std::vector<std::pair<std::string, std::string>> skipped_;
  uint64_t seed_ = 0;
  mutable std::atomic<int64_t> epoch_{0};
};

}  // namespace volt::data
