// The image operations, written to reproduce PIL 9's integer arithmetic (libImaging's Resample.c,
// Blend.c and Convert.c) so that Volt's transforms give torchvision's pixels on a PIL image.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "volt/core/error.h"
#include "volt/data/image/transforms.h"

namespace volt::data::transforms::functional {
namespace {

std::string describe(const at::Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  std::string out = std::string(c10::toString(t.scalar_type())) + " [";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d > 0 ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

bool is_image(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == at::kByte && t.dim() == 3 && (t.size(2) == 1 || t.size(2) == 3) &&
         t.size(0) > 0 && t.size(1) > 0;
}

bool is_float_chw(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == at::kFloat && t.dim() == 3 && t.size(1) > 0 && t.size(2) > 0;
}

void check_image(const at::Tensor& t, const char* op) {
  if (is_image(t)) return;
  throw ConfigError(std::string(op) + " takes a uint8 image [H, W, C] with C = 1 or 3 (as read_image returns), got " +
                    describe(t) + ". Put it before ToTensor in a Compose.");
}

void check_size(int64_t height, int64_t width, const char* op) {
  if (height < 1 || width < 1 || height > (1 << 15) || width > (1 << 15)) {
    throw ConfigError(std::string(op) + ": the output size must be 1 .. 32768 on each side, got " +
                      std::to_string(height) + " x " + std::to_string(width) + ".");
  }
}

constexpr int kPrecisionBits = 32 - 8 - 2;

inline uint8_t clip8(int v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// PIL's precompute_coeffs with the bilinear (triangle) filter, then normalize_coeffs_8bpc.
struct Coeffs {
  int ksize = 0;
  std::vector<int> bounds;  // per output: first input, count
  std::vector<int> k;       // per output: ksize fixed-point weights
};

Coeffs precompute(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<size_t>(out_size) * 2);
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(static_cast<size_t>(c.ksize));
  const double ss = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      double t = (x + xmin - center + 0.5) * ss;
      if (t < 0.0) t = -t;
      const double v = t < 1.0 ? 1.0 - t : 0.0;
      w[static_cast<size_t>(x)] = v;
      ww += v;
    }
    int* k = &c.k[static_cast<size_t>(xx) * c.ksize];
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? w[static_cast<size_t>(x)] / ww : w[static_cast<size_t>(x)];
      k[x] = v < 0 ? static_cast<int>(-0.5 + v * (1 << kPrecisionBits))
                   : static_cast<int>(0.5 + v * (1 << kPrecisionBits));
    }
    c.bounds[static_cast<size_t>(xx) * 2] = xmin;
    c.bounds[static_cast<size_t>(xx) * 2 + 1] = xmax;
  }
  return c;
}

// One channel count at compile time, so the inner loops unroll.
template <int C>
void horizontal(const uint8_t* in, int64_t in_stride, int rows, uint8_t* out, int out_w, const Coeffs& c) {
  // Plain pointers: the uint8 stores below may alias anything, so members read through `c`
  // would be loaded again after each one.
  const int* bounds = c.bounds.data();
  const int* kk = c.k.data();
  const int ksize = c.ksize;
  for (int y = 0; y < rows; ++y) {
    const uint8_t* src = in + y * in_stride;
    uint8_t* dst = out + static_cast<int64_t>(y) * out_w * C;
    for (int xx = 0; xx < out_w; ++xx) {
      const int xmin = bounds[2 * xx], n = bounds[2 * xx + 1];
      const int* k = kk + xx * ksize;
      int ss[C];
      for (int ch = 0; ch < C; ++ch) ss[ch] = 1 << (kPrecisionBits - 1);
      const uint8_t* p = src + static_cast<int64_t>(xmin) * C;
      for (int x = 0; x < n; ++x) {
        const int kx = k[x];
        for (int ch = 0; ch < C; ++ch) ss[ch] += p[x * C + ch] * kx;
      }
      for (int ch = 0; ch < C; ++ch) dst[xx * C + ch] = clip8(ss[ch]);
    }
  }
}

template <int C>
void vertical(const uint8_t* in, int64_t in_stride, int row_offset, uint8_t* out, int out_h, int w, const Coeffs& c) {
  std::vector<int> acc(static_cast<size_t>(w) * C);
  int* ss = acc.data();
  const int* bounds = c.bounds.data();
  const int* kk = c.k.data();
  const int ksize = c.ksize, len = w * C;
  for (int yy = 0; yy < out_h; ++yy) {
    const int ymin = bounds[2 * yy] - row_offset, n = bounds[2 * yy + 1];
    const int* k = kk + yy * ksize;
    for (int i = 0; i < len; ++i) ss[i] = 1 << (kPrecisionBits - 1);
    for (int y = 0; y < n; ++y) {
      const uint8_t* src = in + (ymin + y) * in_stride;
      const int ky = k[y];
      for (int i = 0; i < len; ++i) ss[i] += src[i] * ky;
    }
    uint8_t* dst = out + static_cast<int64_t>(yy) * len;
    for (int i = 0; i < len; ++i) dst[i] = clip8(ss[i]);
  }
}

// PIL's ImagingResampleInner on a [h, w, C] region with row stride `stride` (bytes).
template <int C>
at::Tensor resample(const uint8_t* in, int64_t stride, int h, int w, int out_h, int out_w) {
  const bool need_h = out_w != w, need_v = out_h != h;
  at::Tensor out = at::empty({out_h, out_w, C}, at::kByte);
  if (!need_h && !need_v) {
    for (int y = 0; y < h; ++y)
      std::memcpy(out.data_ptr<uint8_t>() + static_cast<int64_t>(y) * w * C, in + y * stride,
                  static_cast<size_t>(w) * C);
    return out;
  }
  const Coeffs cv = need_v ? precompute(h, out_h) : Coeffs{};
  if (!need_v) {
    horizontal<C>(in, stride, h, out.data_ptr<uint8_t>(), out_w, precompute(w, out_w));
    return out;
  }
  if (!need_h) {
    vertical<C>(in, stride, 0, out.data_ptr<uint8_t>(), out_h, w, cv);
    return out;
  }
  // Only the rows the vertical pass reads go through the horizontal one.
  const int first = cv.bounds[0];
  const int last = cv.bounds[static_cast<size_t>(out_h) * 2 - 2] + cv.bounds[static_cast<size_t>(out_h) * 2 - 1];
  std::vector<uint8_t> tmp(static_cast<size_t>(last - first) * out_w * C);
  horizontal<C>(in + first * stride, stride, last - first, tmp.data(), out_w, precompute(w, out_w));
  vertical<C>(tmp.data(), static_cast<int64_t>(out_w) * C, first, out.data_ptr<uint8_t>(), out_h, out_w, cv);
  return out;
}

at::Tensor resize_region(const at::Tensor& image, const CropBox& box, int64_t height, int64_t width) {
  const at::Tensor img = image.contiguous();
  const int64_t c = img.size(2);
  const int64_t stride = img.size(1) * c;
  const uint8_t* in = img.data_ptr<uint8_t>() + box.top * stride + box.left * c;
  const int h = static_cast<int>(box.height), w = static_cast<int>(box.width);
  return c == 3 ? resample<3>(in, stride, h, w, static_cast<int>(height), static_cast<int>(width))
                : resample<1>(in, stride, h, w, static_cast<int>(height), static_cast<int>(width));
}

void check_box(const at::Tensor& image, const CropBox& b, const char* op) {
  if (b.height < 1 || b.width < 1 || b.top < 0 || b.left < 0 || b.top + b.height > image.size(0) ||
      b.left + b.width > image.size(1)) {
    throw ConfigError(std::string(op) + ": the box top=" + std::to_string(b.top) + " left=" + std::to_string(b.left) +
                      " height=" + std::to_string(b.height) + " width=" + std::to_string(b.width) +
                      " does not lie inside the " + std::to_string(image.size(0)) + " x " +
                      std::to_string(image.size(1)) + " image. Give a box with at least one pixel inside it.");
  }
}

// PIL's ImagingBlend(degenerate, image, alpha): image weighted by alpha, the degenerate by 1 - alpha,
// in float, truncated (and clipped when extrapolating). `degenerate(i)` gives the value at byte i.
template <typename Degenerate>
at::Tensor blend(const at::Tensor& image, double factor, Degenerate degenerate) {
  const at::Tensor img = image.contiguous();
  at::Tensor out = at::empty_like(img);
  const uint8_t* in = img.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  const int64_t n = img.numel();
  const float alpha = static_cast<float>(factor);
  if (alpha >= 0 && alpha <= 1.0) {
    for (int64_t i = 0; i < n; ++i) {
      const int d = degenerate(i);
      dst[i] = static_cast<uint8_t>(static_cast<float>(d) + alpha * static_cast<float>(in[i] - d));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const int d = degenerate(i);
      const float t = static_cast<float>(d) + alpha * static_cast<float>(in[i] - d);
      dst[i] = t <= 0.0f ? 0 : (t >= 255.0f ? 255 : static_cast<uint8_t>(t));
    }
  }
  return out;
}

inline int luma(const uint8_t* p) {
  return static_cast<int>((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
}

void check_factor(double factor, const char* op) {
  if (!(factor >= 0) || !std::isfinite(factor)) {
    throw ConfigError(std::string(op) + ": the factor must be a finite number >= 0, got " + std::to_string(factor) +
                      ". 1 leaves the image as it is.");
  }
}

}  // namespace

at::Tensor resize(const at::Tensor& image, int64_t height, int64_t width) {
  check_image(image, "resize");
  check_size(height, width, "resize");
  return resize_region(image, CropBox{0, 0, image.size(0), image.size(1)}, height, width);
}

at::Tensor crop(const at::Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width) {
  check_image(image, "crop");
  const CropBox box{top, left, height, width};
  check_box(image, box, "crop");
  return image.slice(0, top, top + height).slice(1, left, left + width).contiguous();
}

at::Tensor resized_crop(const at::Tensor& image, const CropBox& box, int64_t height, int64_t width) {
  check_image(image, "resized_crop");
  check_box(image, box, "resized_crop");
  check_size(height, width, "resized_crop");
  return resize_region(image, box, height, width);
}

at::Tensor center_crop(const at::Tensor& image, int64_t height, int64_t width) {
  const bool hwc = is_image(image);
  if (!hwc && !is_float_chw(image)) {
    throw ConfigError("center_crop takes a uint8 image [H, W, C] or a float tensor [C, H, W], got " + describe(image) +
                      ".");
  }
  check_size(height, width, "center_crop");
  const int hd = hwc ? 0 : 1, wd = hwc ? 1 : 2;
  at::Tensor img = image;
  int64_t ih = img.size(hd), iw = img.size(wd);
  if (width > iw || height > ih) {  // torchvision pads with zeros first, left/top getting the smaller half
    const int64_t pl = width > iw ? (width - iw) / 2 : 0, pt = height > ih ? (height - ih) / 2 : 0;
    const int64_t nw = std::max(width, iw), nh = std::max(height, ih);
    std::vector<int64_t> shape = img.sizes().vec();
    shape[static_cast<size_t>(hd)] = nh;
    shape[static_cast<size_t>(wd)] = nw;
    at::Tensor padded = at::zeros(shape, img.options());
    padded.slice(hd, pt, pt + ih).slice(wd, pl, pl + iw).copy_(img);
    img = padded;
    ih = nh;
    iw = nw;
    if (ih == height && iw == width) return img;
  }
  // Python's round() rounds halves to even, as nearbyint does in the default rounding mode.
  const int64_t top = static_cast<int64_t>(std::nearbyint((ih - height) / 2.0));
  const int64_t left = static_cast<int64_t>(std::nearbyint((iw - width) / 2.0));
  return img.slice(hd, top, top + height).slice(wd, left, left + width).contiguous();
}

at::Tensor hflip(const at::Tensor& image) {
  if (is_image(image)) {
    const at::Tensor img = image.contiguous();
    at::Tensor out = at::empty_like(img);
    const int64_t h = img.size(0), w = img.size(1), c = img.size(2);
    const uint8_t* in = img.data_ptr<uint8_t>();
    uint8_t* dst = out.data_ptr<uint8_t>();
    for (int64_t y = 0; y < h; ++y) {
      const uint8_t* row = in + y * w * c;
      uint8_t* o = dst + y * w * c;
      if (c == 3) {
        for (int64_t x = 0; x < w; ++x) {
          const uint8_t* p = row + (w - 1 - x) * 3;
          o[3 * x] = p[0];
          o[3 * x + 1] = p[1];
          o[3 * x + 2] = p[2];
        }
      } else {
        for (int64_t x = 0; x < w; ++x) o[x] = row[w - 1 - x];
      }
    }
    return out;
  }
  if (is_float_chw(image)) return at::flip(image, {2});
  throw ConfigError("hflip takes a uint8 image [H, W, C] or a float tensor [C, H, W], got " + describe(image) + ".");
}

at::Tensor adjust_brightness(const at::Tensor& image, double factor) {
  check_image(image, "adjust_brightness");
  check_factor(factor, "adjust_brightness");
  return blend(image, factor, [](int64_t) { return 0; });
}

at::Tensor adjust_contrast(const at::Tensor& image, double factor) {
  check_image(image, "adjust_contrast");
  check_factor(factor, "adjust_contrast");
  const at::Tensor img = image.contiguous();
  const uint8_t* p = img.data_ptr<uint8_t>();
  const int64_t pixels = img.size(0) * img.size(1), c = img.size(2);
  // ImageStat's mean of the L image (a sum over its histogram), rounded half up.
  uint64_t sum = 0;
  for (int64_t i = 0; i < pixels; ++i) sum += c == 3 ? static_cast<uint64_t>(luma(p + 3 * i)) : p[i];
  const int mean = static_cast<int>(static_cast<double>(sum) / static_cast<double>(pixels) + 0.5);
  return blend(img, factor, [mean](int64_t) { return mean; });
}

at::Tensor adjust_saturation(const at::Tensor& image, double factor) {
  check_image(image, "adjust_saturation");
  check_factor(factor, "adjust_saturation");
  const at::Tensor img = image.contiguous();
  if (img.size(2) == 1) return blend(img, factor, [p = img.data_ptr<uint8_t>()](int64_t i) { return int{p[i]}; });
  const uint8_t* p = img.data_ptr<uint8_t>();
  return blend(img, factor, [p](int64_t i) { return luma(p + (i - i % 3)); });
}

at::Tensor to_tensor(const at::Tensor& image) {
  check_image(image, "to_tensor");
  return normalize(image, {0.0f}, {1.0f});
}

at::Tensor normalize(const at::Tensor& image, const std::vector<float>& mean, const std::vector<float>& std) {
  // A uint8 image goes straight to normalized floats (ToTensor and Normalize in one pass, with
  // the same float32 operations: v / 255, then (x - mean) / std).
  const bool from_image = is_image(image);
  if (!from_image && !is_float_chw(image)) {
    throw ConfigError("normalize takes a float tensor [C, H, W] (after ToTensor), got " + describe(image) + ".");
  }
  const int64_t c = from_image ? image.size(2) : image.size(0);
  const int64_t h = from_image ? image.size(0) : image.size(1), w = from_image ? image.size(1) : image.size(2);
  if (mean.size() != 1 && static_cast<int64_t>(mean.size()) != c) {
    throw ConfigError("normalize: " + std::to_string(mean.size()) + " means for an image of " + std::to_string(c) +
                      " channels. Give one value or one per channel.");
  }
  if (std.size() != mean.size()) {
    throw ConfigError("normalize: " + std::to_string(mean.size()) + " means but " + std::to_string(std.size()) +
                      " standard deviations. Give as many of each.");
  }
  const at::Tensor img = image.contiguous();
  at::Tensor out = at::empty({c, h, w}, at::kFloat);
  float* dst = out.data_ptr<float>();
  const int64_t n = h * w;
  for (int64_t ch = 0; ch < c; ++ch) {
    const float m = mean[mean.size() == 1 ? 0 : static_cast<size_t>(ch)];
    const float s = std[std.size() == 1 ? 0 : static_cast<size_t>(ch)];
    float* o = dst + ch * n;
    if (from_image) {
      // 256 possible inputs: a table of the exact float32 results.
      float table[256];
      for (int v = 0; v < 256; ++v) {
        const float x = static_cast<float>(v) / 255.0f;
        table[v] = (m == 0.0f && s == 1.0f) ? x : (x - m) / s;
      }
      const uint8_t* in = img.data_ptr<uint8_t>() + ch;
      for (int64_t i = 0; i < n; ++i) o[i] = table[in[i * c]];
    } else {
      const float* in = img.data_ptr<float>() + ch * n;
      for (int64_t i = 0; i < n; ++i) o[i] = (in[i] - m) / s;
    }
  }
  return out;
}

}  // namespace volt::data::transforms::functional
