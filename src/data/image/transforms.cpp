#include "volt/data/image/transforms.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randperm.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "volt/core/error.h"

namespace volt::data::transforms {
namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

template <typename T>
std::string list_g(const std::vector<T>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i > 0 ? ", " : "") << v[i];
  out << "]";
  return out.str();
}

// {s} or {h, w}, each 1 .. 32768.
void check_size(const std::vector<int64_t>& size, const char* what) {
  const bool ok = (size.size() == 1 || size.size() == 2) &&
                  std::all_of(size.begin(), size.end(), [](int64_t s) { return s >= 1 && s <= (1 << 15); });
  if (!ok) {
    throw ConfigError(std::string(what) + ": size must be {s} or {height, width} with each 1 .. 32768, got " +
                      list(size) + ".");
  }
}

// A draw as torchvision draws it: torch.empty(1).uniform_(from, to).item() (float32, then double).
double uniform(double from, double to, at::Generator& gen) {
  return static_cast<double>(at::empty({1}, at::kFloat).uniform_(from, to, gen).item<float>());
}

int64_t randint(int64_t low, int64_t high, at::Generator& gen) {
  return at::randint(low, high, {1}, gen, at::TensorOptions().dtype(at::kLong)).item<int64_t>();
}

// Python's round(): halves to even.
int64_t py_round(double x) {
  return static_cast<int64_t>(std::nearbyint(x));
}

void check_range(const std::vector<double>& r, const char* what, const char* name) {
  if (r.size() != 2 || !(r[0] > 0) || !(r[0] <= r[1]) || !std::isfinite(r[1])) {
    throw ConfigError(std::string(what) + ": " + name + " must be {low, high} with 0 < low <= high, got " + list_g(r) +
                      ".");
  }
}

}  // namespace

at::Generator make_generator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

at::Tensor apply(const Transform& transform, const at::Tensor& image, uint64_t seed) {
  at::Generator gen = make_generator(seed);
  return transform(image, gen);
}

Compose::Compose(std::vector<TransformPtr> transforms) : transforms_(std::move(transforms)) {
  for (size_t i = 0; i < transforms_.size(); ++i) {
    if (!transforms_[i]) {
      throw ConfigError("Compose: transform " + std::to_string(i) + " of " + std::to_string(transforms_.size()) +
                        " is null. Pass std::make_shared<Resize>(...) and the like.");
    }
  }
  fused_.assign(transforms_.size(), false);
  for (size_t i = 0; i + 1 < transforms_.size(); ++i) {
    fused_[i] = dynamic_cast<const ToTensor*>(transforms_[i].get()) != nullptr &&
                dynamic_cast<const Normalize*>(transforms_[i + 1].get()) != nullptr;
  }
}

at::Tensor Compose::operator()(const at::Tensor& image, at::Generator& gen) const {
  at::Tensor out = image;
  for (size_t i = 0; i < transforms_.size(); ++i) {
    // Normalize takes the uint8 image itself; ToTensor's checks still apply to what it is given.
    if (fused_[i] && out.scalar_type() == at::kByte && out.dim() == 3 && (out.size(2) == 1 || out.size(2) == 3))
      continue;
    out = (*transforms_[i])(out, gen);
  }
  return out;
}

std::string Compose::repr() const {
  std::string out = "Compose(\n";
  for (const auto& t : transforms_) out += "    " + t->repr() + "\n";
  return out + ")";
}

at::Tensor ToTensor::operator()(const at::Tensor& image, at::Generator&) const {
  return functional::to_tensor(image);
}

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) {
  if (mean.empty() || mean.size() != std.size()) {
    throw ConfigError("Normalize: give as many means as standard deviations (one, or one per channel), got " +
                      std::to_string(mean.size()) + " and " + std::to_string(std.size()) + ".");
  }
  for (size_t i = 0; i < std.size(); ++i) {
    if (std[i] == 0 || !std::isfinite(std[i]) || !std::isfinite(mean[i])) {
      throw ConfigError("Normalize: std " + list_g(std) + " and mean " + list_g(mean) +
                        " must be finite and std non-zero (it divides). ImageNet's are mean {0.485, 0.456, 0.406}, "
                        "std {0.229, 0.224, 0.225}.");
    }
    mean_.push_back(static_cast<float>(mean[i]));
    std_.push_back(static_cast<float>(std[i]));
  }
}

at::Tensor Normalize::operator()(const at::Tensor& image, at::Generator&) const {
  return functional::normalize(image, mean_, std_);
}

std::string Normalize::repr() const {
  return "Normalize(mean=" + list_g(mean_) + ", std=" + list_g(std_) + ")";
}

Resize::Resize(std::vector<int64_t> size) : size_(std::move(size)) {
  check_size(size_, "Resize");
}

at::Tensor Resize::operator()(const at::Tensor& image, at::Generator&) const {
  if (image.dim() != 3) return functional::resize(image, 1, 1);  // refused there, naming the tensor
  const int64_t h = image.size(0), w = image.size(1);
  int64_t nh = 0, nw = 0;
  if (size_.size() == 2) {
    nh = size_[0];
    nw = size_[1];
  } else {  // torchvision's _compute_resized_output_size: int(s * long / short)
    const int64_t shorter = std::min(h, w), longer = std::max(h, w);
    const int64_t s = size_[0],
                  l = static_cast<int64_t>(static_cast<double>(s * longer) / static_cast<double>(shorter));
    nh = w <= h ? l : s;
    nw = w <= h ? s : l;
  }
  if (nh == h && nw == w && image.scalar_type() == at::kByte) return image;
  return functional::resize(image, nh, nw);
}

std::string Resize::repr() const {
  return "Resize(size=" + list(size_) + ", interpolation=bilinear)";
}

CenterCrop::CenterCrop(std::vector<int64_t> size) {
  check_size(size, "CenterCrop");
  height_ = size[0];
  width_ = size.size() == 2 ? size[1] : size[0];
}

at::Tensor CenterCrop::operator()(const at::Tensor& image, at::Generator&) const {
  return functional::center_crop(image, height_, width_);
}

std::string CenterCrop::repr() const {
  return "CenterCrop(size=(" + std::to_string(height_) + ", " + std::to_string(width_) + "))";
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  if (!(p >= 0 && p <= 1)) {
    throw ConfigError("RandomHorizontalFlip: p must be a probability in 0 .. 1, got " + std::to_string(p) + ".");
  }
}

at::Tensor RandomHorizontalFlip::operator()(const at::Tensor& image, at::Generator& gen) const {
  // torch.rand(1) < p compares in float32.
  if (at::rand({1}, gen, at::kFloat).item<float>() < static_cast<float>(p_)) return functional::hflip(image);
  return image;
}

std::string RandomHorizontalFlip::repr() const {
  std::ostringstream out;
  out << "RandomHorizontalFlip(p=" << p_ << ")";
  return out.str();
}

RandomResizedCrop::RandomResizedCrop(std::vector<int64_t> size, std::vector<double> scale, std::vector<double> ratio)
    : scale_(std::move(scale)), ratio_(std::move(ratio)) {
  check_size(size, "RandomResizedCrop");
  height_ = size[0];
  width_ = size.size() == 2 ? size[1] : size[0];
  check_range(scale_, "RandomResizedCrop", "scale");
  check_range(ratio_, "RandomResizedCrop", "ratio");
}

CropBox RandomResizedCrop::get_params(int64_t height, int64_t width, const std::vector<double>& scale,
                                      const std::vector<double>& ratio, at::Generator& gen) {
  const double area = static_cast<double>(height * width);
  // torch.log(torch.tensor(ratio)): the logs are float32, as are the exp of the draws.
  const at::Tensor log_ratio = at::log(at::tensor({static_cast<float>(ratio[0]), static_cast<float>(ratio[1])}));
  const double lo = log_ratio[0].item<float>(), hi = log_ratio[1].item<float>();
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * uniform(scale[0], scale[1], gen);
    const at::Tensor draw = at::empty({1}, at::kFloat).uniform_(lo, hi, gen);
    const double aspect = static_cast<double>(at::exp(draw).item<float>());
    const int64_t w = py_round(std::sqrt(target_area * aspect));
    const int64_t h = py_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int64_t i = randint(0, height - h + 1, gen);
      const int64_t j = randint(0, width - w + 1, gen);
      return CropBox{i, j, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  const double rmin = std::min(ratio[0], ratio[1]), rmax = std::max(ratio[0], ratio[1]);
  int64_t w = width, h = height;
  if (in_ratio < rmin) {
    h = py_round(static_cast<double>(w) / rmin);
  } else if (in_ratio > rmax) {
    w = py_round(static_cast<double>(h) * rmax);
  }
  return CropBox{(height - h) / 2, (width - w) / 2, h, w};
}

at::Tensor RandomResizedCrop::operator()(const at::Tensor& image, at::Generator& gen) const {
  if (image.dim() != 3) return functional::resize(image, 1, 1);  // refused there, naming the tensor
  const CropBox box = get_params(image.size(0), image.size(1), scale_, ratio_, gen);
  return functional::resized_crop(image, box, height_, width_);
}

std::string RandomResizedCrop::repr() const {
  return "RandomResizedCrop(size=(" + std::to_string(height_) + ", " + std::to_string(width_) +
         "), scale=" + list_g(scale_) + ", ratio=" + list_g(ratio_) + ", interpolation=bilinear)";
}

ColorJitter::ColorJitter(double brightness, double contrast, double saturation)
    : brightness_(brightness), contrast_(contrast), saturation_(saturation) {
  for (const double v : {brightness, contrast, saturation}) {
    if (!(v >= 0) || !std::isfinite(v)) {
      throw ConfigError("ColorJitter: brightness, contrast and saturation must be finite and >= 0, got " +
                        list_g(std::vector<double>{brightness, contrast, saturation}) + ". 0 leaves one out.");
    }
  }
}

JitterParams ColorJitter::get_params(at::Generator& gen) const {
  JitterParams p;
  const at::Tensor order = at::randperm(4, gen, at::TensorOptions().dtype(at::kLong));
  p.order.assign(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + 4);
  // torchvision turns x into [max(0, 1 - x), 1 + x] and leaves an adjustment out when x is 0.
  if (brightness_ > 0) p.brightness = uniform(std::max(0.0, 1 - brightness_), 1 + brightness_, gen);
  if (contrast_ > 0) p.contrast = uniform(std::max(0.0, 1 - contrast_), 1 + contrast_, gen);
  if (saturation_ > 0) p.saturation = uniform(std::max(0.0, 1 - saturation_), 1 + saturation_, gen);
  return p;
}

at::Tensor ColorJitter::operator()(const at::Tensor& image, at::Generator& gen) const {
  const JitterParams p = get_params(gen);
  at::Tensor out = image;
  for (const int64_t fn : p.order) {
    if (fn == 0 && brightness_ > 0) out = functional::adjust_brightness(out, p.brightness);
    if (fn == 1 && contrast_ > 0) out = functional::adjust_contrast(out, p.contrast);
    if (fn == 2 && saturation_ > 0) out = functional::adjust_saturation(out, p.saturation);
  }
  return out;
}

std::string ColorJitter::repr() const {
  std::ostringstream out;
  out << "ColorJitter(brightness=" << brightness_ << ", contrast=" << contrast_ << ", saturation=" << saturation_
      << ")";
  return out.str();
}

}  // namespace volt::data::transforms
