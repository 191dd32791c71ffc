// ModelCheckpoint's file names: the filename template ("{epoch}-{val_loss:.2f}"), its
// rendering with Python's number formats, the version counter for names already taken, and
// the .safetensors companion of a .ckpt.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>
#include <system_error>

#include "callbacks/detail/python_text.h"
#include "volt/callbacks/model_checkpoint.h"
#include "volt/core/error.h"

namespace volt::callbacks {
namespace {

namespace fs = std::filesystem;
using detail::key_list;
using detail::py_str;

constexpr const char* kExtension = ".ckpt";

// Python's repr(float): the shortest digits that read back to the same double, in fixed
// notation for exponents -4..15 and scientific otherwise, so names match Lightning's.
std::string python_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  for (int p = 0; p < 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s(buf);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const size_t e = s.find('e');
  const int exp10 = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, 1) + (e > 1 ? s.substr(2, e - 2) : "");
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) return sign + "0." + std::string(-exp10 - 1, '0') + digits;
    if (static_cast<int>(digits.size()) <= exp10 + 1) {
      return sign + digits + std::string(exp10 + 1 - digits.size(), '0') + ".0";
    }
    return sign + digits.substr(0, exp10 + 1) + "." + digits.substr(exp10 + 1);
  }
  std::string mant = digits.substr(0, 1);
  if (digits.size() > 1) mant += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return sign + mant + ebuf;
}

std::string pad_left(const std::string& s, int width) {
  if (static_cast<int>(s.size()) >= width) return s;
  return std::string(width - s.size(), ' ') + s;
}

}  // namespace

std::vector<ModelCheckpoint::Piece> ModelCheckpoint::parse_template(const std::string& tmpl,
                                                                    const std::string& what) {
  std::vector<Piece> pieces;
  const std::string supported =
      " Supported: {key}, {key:d}, {key:03d}, {key:.2f}, {key:08.3f}, {key:.3e}, {key:.4g}.";
  size_t i = 0;
  while (i < tmpl.size()) {
    const size_t open = tmpl.find('{', i);
    if (open != i) {
      Piece lit;
      lit.text = tmpl.substr(i, open == std::string::npos ? std::string::npos : open - i);
      pieces.push_back(lit);
      if (open == std::string::npos) break;
    }
    const size_t close = tmpl.find('}', open);
    if (close == std::string::npos) {
      throw ConfigError(what + " has a '{' at position " + std::to_string(open) +
                        " without a closing '}'. Close it, e.g. '{epoch}-{val_loss:.2f}'.");
    }
    const std::string field = tmpl.substr(open + 1, close - open - 1);
    const size_t colon = field.find(':');
    Piece f;
    f.is_field = true;
    f.text = field.substr(0, colon);
    if (f.text.empty()) {
      throw ConfigError(what + " has an empty field '{" + field +
                        "}'. Name a metric, 'epoch' or 'step' inside the braces.");
    }
    if (colon != std::string::npos) {
      const std::string spec = field.substr(colon + 1);
      size_t p = 0;
      if (p < spec.size() && spec[p] == '0') {
        f.zero_pad = true;
        ++p;
      }
      while (p < spec.size() && std::isdigit(static_cast<unsigned char>(spec[p]))) {
        f.width = f.width * 10 + (spec[p++] - '0');
      }
      if (p < spec.size() && spec[p] == '.') {
        ++p;
        const size_t start = p;
        f.precision = 0;
        while (p < spec.size() && std::isdigit(static_cast<unsigned char>(spec[p]))) {
          f.precision = f.precision * 10 + (spec[p++] - '0');
        }
        if (p == start) f.precision = -2;
      }
      if (p < spec.size() && std::string("dfeg").find(spec[p]) != std::string::npos) {
        f.type = spec[p++];
      }
      const bool bad = p != spec.size() || f.precision == -2 || f.width > 64 ||
                       f.precision > 30 || (f.type == 'd' && f.precision >= 0);
      if (bad) {
        throw ConfigError(what + " formats '" + f.text + "' with the spec '" + spec +
                          "', which Volt does not support." + supported);
      }
    }
    pieces.push_back(f);
    i = close + 1;
  }
  return pieces;
}

ModelCheckpoint::Candidates ModelCheckpoint::candidates(const MetricMap& metrics, int64_t epoch,
                                                        int64_t step) const {
  Candidates out;
  for (const auto& [key, value] : metrics) out[key] = Candidate{value, false};
  // As in Lightning, a logged "epoch"/"step" wins but is cast to an integer.
  auto as_int = [&](const char* key, int64_t fallback) {
    auto it = metrics.find(key);
    const bool usable = it != metrics.end() && std::fabs(it->second) < 9.2e18;
    const double v = usable ? std::trunc(it->second) : static_cast<double>(fallback);
    out[key] = Candidate{v, true};
  };
  as_int("epoch", epoch);
  as_int("step", step);
  return out;
}

ModelCheckpoint::Candidates ModelCheckpoint::candidates(const TrainerView& view) const {
  return candidates(view.callback_metrics(), view.state().current_epoch,
                    view.state().global_step);
}

std::string ModelCheckpoint::render(const std::vector<Piece>& pieces, const std::string& tmpl,
                                    const Candidates& values, int64_t version) const {
  std::string name;
  char buf[128];
  for (const Piece& p : pieces) {
    if (!p.is_field) {
      name += p.text;
      continue;
    }
    auto it = values.find(p.text);
    if (it == values.end()) {
      MetricMap logged;
      for (const auto& [key, c] : values) {
        if (key != "epoch" && key != "step") logged[key] = c.value;
      }
      throw ConfigError("ModelCheckpoint(filename=" + py_str(tmpl) + ") uses '" + p.text +
                        "', which is not among the logged metrics: " + key_list(logged) +
                        " ('epoch' and 'step' are always available). Log it with ctx.log(\"" +
                        p.text + "\", ...) or change filename.");
    }
    const double v = it->second.value;
    const bool integral = it->second.is_int || (std::isfinite(v) && v == std::trunc(v) &&
                                                std::fabs(v) < 9.2e18 && p.type == 'd');
    std::string text;
    if (p.type == 'd' && !integral) {
      throw ConfigError("ModelCheckpoint(filename=" + py_str(tmpl) + ") formats '" + p.text +
                        "' as an integer (':d'), but its value " + python_repr(v) +
                        " is not one. Use a float spec such as '{" + p.text + ":.2f}'.");
    }
    if (!std::isfinite(v)) {
      text = pad_left(python_repr(v), p.width);
    } else if (integral && (p.type == 0 || p.type == 'd') && p.precision < 0) {
      std::snprintf(buf, sizeof buf, p.zero_pad ? "%0*lld" : "%*lld", p.width,
                    static_cast<long long>(v));
      text = buf;
    } else if (p.type == 0 && p.precision < 0) {
      text = pad_left(python_repr(v), p.width);
    } else {
      const char type = p.type == 0 ? 'g' : p.type;
      const int precision = p.precision < 0 ? 6 : p.precision;
      const std::string fmt = std::string(p.zero_pad ? "%0*.*" : "%*.*") + type;
      std::snprintf(buf, sizeof buf, fmt.c_str(), p.width, precision, v);
      text = buf;
    }
    name += options_.auto_insert_metric_name ? p.text + "=" + text : text;
  }
  if (version > 0) name += "-v" + std::to_string(version);
  return name;
}

std::string ModelCheckpoint::join_dir(const std::string& name) const {
  const std::string file = name + kExtension;
  return dirpath_.empty() ? file : (fs::path(dirpath_) / file).string();
}

std::string ModelCheckpoint::format_checkpoint_name(const MetricMap& metrics, int64_t epoch,
                                                    int64_t step, int64_t version) const {
  return join_dir(
      render(filename_pieces_, filename_template_, candidates(metrics, epoch, step), version));
}

std::string ModelCheckpoint::free_path(TrainerView& view, const std::vector<Piece>& pieces,
                                       const std::string& tmpl, const Candidates& values,
                                       const std::string& replaceable) {
  // Names come from each rank's metrics, which may differ: rank 0's name is everyone's.
  std::string path = view.broadcast_from_rank_zero(join_dir(render(pieces, tmpl, values, 0)));
  if (!options_.enable_version_counter) return path;
  auto taken = [&](const std::string& p) {
    if (!view.state().is_global_zero || p == replaceable) return false;
    std::error_code ec;
    return live_paths_.count(p) > 0 || fs::exists(p, ec);
  };
  // One collective per probe on every rank, so ranks whose names differ cannot deadlock.
  for (int64_t v = 1; rank_zero_decides(view, taken(path)); ++v) {
    path = view.broadcast_from_rank_zero(join_dir(render(pieces, tmpl, values, v)));
  }
  return path;
}

std::string ModelCheckpoint::safetensors_path(const std::string& ckpt_path) {
  const std::string ext = ".ckpt";
  const bool has_ext =
      ckpt_path.size() >= ext.size() && ckpt_path.compare(ckpt_path.size() - ext.size(), ext.size(), ext) == 0;
  return (has_ext ? ckpt_path.substr(0, ckpt_path.size() - ext.size()) : ckpt_path) + ".safetensors";
}

}  // namespace volt::callbacks
