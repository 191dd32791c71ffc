#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace volt::data::transforms {

/// Image transforms with torchvision's names and semantics (torchvision 0.14 on a PIL image).
///
/// An image is a uint8 tensor [H, W, C] (C = 1 or 3), as read_image returns it; the geometric and
/// colour transforms take and give such images and reproduce PIL's integer arithmetic, so their
/// output equals torchvision's on the PIL image. ToTensor turns an image into float [C, H, W] in
/// [0, 1]; Normalize and RandomHorizontalFlip also take that float layout.
///
/// Random transforms draw from the sample's generator (a LibTorch CPU generator) with the same
/// calls as torchvision draws from torch's global one, so with a generator seeded with `s` they
/// choose the parameters torchvision chooses after torch.manual_seed(s).
class Transform {
 public:
  virtual ~Transform() = default;
  /// Transforms one image. `gen` is the sample's generator; deterministic transforms ignore it.
  virtual at::Tensor operator()(const at::Tensor& image, at::Generator& gen) const = 0;
  /// torchvision's repr, e.g. "Resize(size=[256], interpolation=bilinear)".
  virtual std::string repr() const = 0;
};

using TransformPtr = std::shared_ptr<const Transform>;

/// A CPU generator seeded with `seed` (torch.manual_seed(seed)'s state).
at::Generator make_generator(uint64_t seed);

/// Applies `transform` to `image` with a generator seeded with `seed`.
at::Tensor apply(const Transform& transform, const at::Tensor& image, uint64_t seed);

/// Runs transforms in order (torchvision's Compose). A null entry is a ConfigError. ToTensor
/// directly followed by Normalize runs as one pass over the uint8 image (the same float32
/// operations, so the same values, without the intermediate tensor).
class Compose : public Transform {
 public:
  explicit Compose(std::vector<TransformPtr> transforms);
  at::Tensor operator()(const at::Tensor& image, at::Generator& gen) const override;
  std::string repr() const override;

 private:
  std::vector<TransformPtr> transforms_;
  std::vector<bool> fused_;  // fused_[i]: transforms_[i] is a ToTensor whose Normalize (i + 1) does both
};

/// uint8 [H, W, C] -> float32 [C, H, W], each value divided by 255 (torchvision's ToTensor).
class ToTensor : public Transform {
 public:
  at::Tensor operator()(const at::Tensor& image, at::Generator& gen) const override;
  std::string repr() const override { return "ToTensor()"; }
};

/// (x - mean[c]) / std[c] per channel of a float [C, H, W] tensor, in float32 as torchvision
/// computes it. One value, or one per channel; a std of 0 is a ConfigError.
class Normalize : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  at::Tensor operator()(const at::Tensor& image, at::Generator& gen) const override;
  std::string repr() const override;

 private:
  std::vector<float> mean_, std_;
};

/// Bilinear resize as PIL resizes (torchvision 0.14 on a PIL image): a separable triangle
/// filter widened by the scale factor when shrinking (antialias), 22-bit fixed-point weights and
/// a rounding to uint8 after each pass. `size` = {s}: the shorter side becomes s and the longer
/// int(s * long / short); {h, w}: exactly h x w. An image that already has the size is returned.
class Resize : public Transform {
 public:
  explicit Resize(std::vector<int64_t> size);
  at::Tensor operator()(const at::Tensor& image, at::Generator& gen) const override;
  std::string repr() const override;

 private:
  std::vector<int64_t> size_;
};

/// The centre h x w region (torchvision's CenterCrop); zero padding where the crop is larger
/// than the image. `size` = {s} or {h, w}.
class CenterCrop : public Transform {
 public:
  explicit CenterCrop(std::vector<int64_t> size);
  at::Tensor operator()(const at::Tensor& image, at::Generator& gen) const override;
  std::string repr() const override;

 private:
  int64_t height_, width_;
};

/// Mirrors left-right with probability p (one draw of torch.rand(1) < p).
class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  at::Tensor operator()(const at::Tensor& image, at::Generator& gen) const override;
  std::string repr() const override;

 private:
  double p_;
};

/// Where RandomResizedCrop cuts: rows top .. top + height, columns left .. left + width.
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

/// A random region of area in `scale` x the image's and aspect ratio in `ratio` (log-uniform),
/// resized to `size` (torchvision's RandomResizedCrop): up to 10 draws, then a centre crop
/// clamped to the ratio range.
class RandomResizedCrop : public Transform {
 public:
  /// size = {s} or {h, w}; 0 < scale[0] <= scale[1]; 0 < ratio[0] <= ratio[1].
  explicit RandomResizedCrop(std::vector<int64_t> size, std::vector<double> scale = {0.08, 1.0},
                             std::vector<double> ratio = {3.0 / 4.0, 4.0 / 3.0});
  /// torchvision's RandomResizedCrop.get_params for an image of height x width.
  static CropBox get_params(int64_t height, int64_t width, const std::vector<double>& scale,
                            const std::vector<double>& ratio, at::Generator& gen);
  at::Tensor operator()(const at::Tensor& image, at::Generator& gen) const override;
  std::string repr() const override;

 private:
  int64_t height_, width_;
  std::vector<double> scale_, ratio_;
};

/// What ColorJitter drew: the order of its four adjustments (0 brightness, 1 contrast,
/// 2 saturation, 3 hue, which Volt does not have) and each factor (1 where not jittered).
struct JitterParams {
  std::vector<int64_t> order;
  double brightness = 1, contrast = 1, saturation = 1;
};

/// Random brightness, contrast and saturation (torchvision's ColorJitter without hue): each
/// factor uniform in [max(0, 1 - x), 1 + x], applied in a random order, as PIL's ImageEnhance
/// applies them. 0 turns an adjustment off.
class ColorJitter : public Transform {
 public:
  explicit ColorJitter(double brightness = 0, double contrast = 0, double saturation = 0);
  /// torchvision's ColorJitter.get_params (with hue=None).
  JitterParams get_params(at::Generator& gen) const;
  at::Tensor operator()(const at::Tensor& image, at::Generator& gen) const override;
  std::string repr() const override;

 private:
  double brightness_, contrast_, saturation_;
};

/// The operations behind the transforms (torchvision.transforms.functional). Images are uint8
/// [H, W, C] unless a function says otherwise; a tensor of another shape or dtype is a
/// ConfigError saying what was given.
namespace functional {

/// PIL's bilinear resize to height x width (see Resize).
at::Tensor resize(const at::Tensor& image, int64_t height, int64_t width);
/// Rows top .. top + height, columns left .. left + width; must lie inside the image.
at::Tensor crop(const at::Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width);
/// uint8 [H, W, C] or float [C, H, W].
at::Tensor center_crop(const at::Tensor& image, int64_t height, int64_t width);
/// crop, then resize (without copying the crop).
at::Tensor resized_crop(const at::Tensor& image, const CropBox& box, int64_t height, int64_t width);
/// uint8 [H, W, C] or float [C, H, W].
at::Tensor hflip(const at::Tensor& image);
/// PIL's ImageEnhance.Brightness: a blend with black.
at::Tensor adjust_brightness(const at::Tensor& image, double factor);
/// PIL's ImageEnhance.Contrast: a blend with the image's mean luma, rounded.
at::Tensor adjust_contrast(const at::Tensor& image, double factor);
/// PIL's ImageEnhance.Color: a blend with the image's luma.
at::Tensor adjust_saturation(const at::Tensor& image, double factor);
/// uint8 [H, W, C] -> float [C, H, W] / 255.
at::Tensor to_tensor(const at::Tensor& image);
/// float [C, H, W]: (x - mean) / std per channel.
at::Tensor normalize(const at::Tensor& image, const std::vector<float>& mean, const std::vector<float>& std);

}  // namespace functional

}  // namespace volt::data::transforms
