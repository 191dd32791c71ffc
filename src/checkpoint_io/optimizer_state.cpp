#include "volt/checkpoint_io/optimizer_state.h"

#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <type_traits>
#include <vector>

#include <ATen/ops/scalar_tensor.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"

namespace volt::checkpoint_io {
namespace {

using json = nlohmann::json;
namespace optim = torch::optim;

enum class OptimizerKind { kSGD, kAdam, kAdamW, kRMSprop, kAdagrad, kLBFGS, kOther };

OptimizerKind kind_of(const optim::Optimizer& o) {
  if (dynamic_cast<const optim::SGD*>(&o)) return OptimizerKind::kSGD;
  if (dynamic_cast<const optim::AdamW*>(&o)) return OptimizerKind::kAdamW;
  if (dynamic_cast<const optim::Adam*>(&o)) return OptimizerKind::kAdam;
  if (dynamic_cast<const optim::RMSprop*>(&o)) return OptimizerKind::kRMSprop;
  if (dynamic_cast<const optim::Adagrad*>(&o)) return OptimizerKind::kAdagrad;
  if (dynamic_cast<const optim::LBFGS*>(&o)) return OptimizerKind::kLBFGS;
  return OptimizerKind::kOther;
}

// LibTorch 1.13 keys an optimizer's state by the parameter's TensorImpl address as a string, 2.x by the
// address itself.
// (1.13's key is c10::guts::to_string of the address: what an ostream prints for the pointer.)
template <class Map>
typename Map::key_type state_key(const at::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream s;
    s << static_cast<const void*>(p.unsafeGetTensorImpl());
    return s.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}
using StateMap = std::remove_reference_t<decltype(std::declval<optim::Optimizer&>().state())>;

at::Tensor step_tensor(int64_t step) {
  return at::scalar_tensor(static_cast<double>(step), at::kFloat);
}

std::string tensor_key(size_t index, int64_t p, const std::string& name) {
  return "optimizer_states." + std::to_string(index) + ".state." + std::to_string(p) + "." + name;
}

json group_options(OptimizerKind kind, const optim::OptimizerOptions& options) {
  // PyTorch 1.13's option names and order; those LibTorch has no setting for take PyTorch's defaults.
  switch (kind) {
    case OptimizerKind::kSGD: {
      const auto& o = static_cast<const optim::SGDOptions&>(options);
      return {{"lr", o.lr()},
              {"momentum", o.momentum()},
              {"dampening", o.dampening()},
              {"weight_decay", o.weight_decay()},
              {"nesterov", o.nesterov()},
              {"maximize", false},
              {"foreach", nullptr},
              {"differentiable", false}};
    }
    case OptimizerKind::kAdam: {
      const auto& o = static_cast<const optim::AdamOptions&>(options);
      return {{"lr", o.lr()},
              {"betas", {std::get<0>(o.betas()), std::get<1>(o.betas())}},
              {"eps", o.eps()},
              {"weight_decay", o.weight_decay()},
              {"amsgrad", o.amsgrad()},
              {"maximize", false},
              {"foreach", nullptr},
              {"capturable", false},
              {"differentiable", false},
              {"fused", false}};
    }
    case OptimizerKind::kAdamW: {
      const auto& o = static_cast<const optim::AdamWOptions&>(options);
      return {{"lr", o.lr()},           {"betas", {std::get<0>(o.betas()), std::get<1>(o.betas())}},
              {"eps", o.eps()},         {"weight_decay", o.weight_decay()},
              {"amsgrad", o.amsgrad()}, {"foreach", nullptr},
              {"maximize", false},      {"capturable", false}};
    }
    case OptimizerKind::kRMSprop: {
      const auto& o = static_cast<const optim::RMSpropOptions&>(options);
      return {{"lr", o.lr()},       {"momentum", o.momentum()}, {"alpha", o.alpha()},
              {"eps", o.eps()},     {"centered", o.centered()}, {"weight_decay", o.weight_decay()},
              {"foreach", nullptr}, {"maximize", false},        {"differentiable", false}};
    }
    case OptimizerKind::kAdagrad: {
      const auto& o = static_cast<const optim::AdagradOptions&>(options);
      return {{"lr", o.lr()},
              {"lr_decay", o.lr_decay()},
              {"eps", o.eps()},
              {"weight_decay", o.weight_decay()},
              {"initial_accumulator_value", o.initial_accumulator_value()},
              {"foreach", nullptr},
              {"maximize", false}};
    }
    case OptimizerKind::kLBFGS: {
      const auto& o = static_cast<const optim::LBFGSOptions&>(options);
      json search = nullptr;
      if (o.line_search_fn()) search = *o.line_search_fn();
      return {{"lr", o.lr()},
              {"max_iter", o.max_iter()},
              {"max_eval", o.max_eval() ? *o.max_eval() : o.max_iter() * 5 / 4},
              {"tolerance_grad", o.tolerance_grad()},
              {"tolerance_change", o.tolerance_change()},
              {"history_size", o.history_size()},
              {"line_search_fn", search}};
    }
    case OptimizerKind::kOther:
      break;
  }
  return json::object();
}

/// Collects what is wrong with a file's values, to report them all at once.
struct Problems {
  std::vector<std::string> list;
  void add(std::string p) { list.push_back(std::move(p)); }
};

double number(const json& group, const char* key, double fallback, const std::string& where, Problems& problems) {
  if (!group.contains(key)) return fallback;
  const json& v = group.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) {
    problems.add(where + "." + key + " is " + v.dump(-1, ' ', false, json::error_handler_t::replace) +
                 ", not a finite number");
    return fallback;
  }
  return v.get<double>();
}

bool flag(const json& group, const char* key, bool fallback, const std::string& where, Problems& problems) {
  if (!group.contains(key)) return fallback;
  const json& v = group.at(key);
  if (!v.is_boolean()) {
    problems.add(where + "." + key + " is " + v.dump(-1, ' ', false, json::error_handler_t::replace) +
                 ", not true or false");
    return fallback;
  }
  return v.get<bool>();
}

/// Applies a file's group options to LibTorch options of `kind` (only after every check passed, `apply`).
std::function<void()> set_options(OptimizerKind kind, optim::OptimizerOptions& options, const json& g, const std::string& where,
                                  Problems& problems) {
  // PyTorch's state_dict does not name the optimizer's class, but its options do: a file of another kind
  // lacks the options of this one.
  static const std::map<OptimizerKind, std::vector<const char*>> kOwnOptions = {
      {OptimizerKind::kSGD, {"momentum", "dampening", "nesterov"}},
      {OptimizerKind::kAdam, {"betas", "eps", "amsgrad"}},
      {OptimizerKind::kAdamW, {"betas", "eps", "amsgrad"}},
      {OptimizerKind::kRMSprop, {"alpha", "centered"}},
      {OptimizerKind::kAdagrad, {"lr_decay", "initial_accumulator_value"}},
      {OptimizerKind::kLBFGS, {"max_iter", "history_size", "tolerance_grad", "tolerance_change"}}};
  std::string lacking;
  for (const char* key : kOwnOptions.at(kind)) {
    if (!g.contains(key)) lacking += std::string(lacking.empty() ? "" : ", ") + "'" + key + "'";
  }
  if (!lacking.empty()) {
    std::string has;
    for (const auto& [key, value] : g.items()) {
      if (key != "params") has += (has.empty() ? "" : ", ") + key;
    }
    problems.add(where + " has no " + lacking +
                 ", options this optimizer has: the file holds another optimizer's "
                 "state (its options: " +
                 has + ")");
  }
  if (g.contains("maximize") && g["maximize"] == true) {
    problems.add(where + ".maximize is true, which LibTorch's optimizers do not offer");
  }
  const double lr = number(g, "lr", options.get_lr(), where, problems);
  auto betas = [&](std::tuple<double, double> fallback) {
    if (!g.contains("betas")) return fallback;
    const json& b = g["betas"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number()) {
      problems.add(where + ".betas is " + b.dump(-1, ' ', false, json::error_handler_t::replace) + ", not two numbers");
      return fallback;
    }
    return std::make_tuple(b[0].get<double>(), b[1].get<double>());
  };
  switch (kind) {
    case OptimizerKind::kSGD: {
      auto& o = static_cast<optim::SGDOptions&>(options);
      const double m = number(g, "momentum", o.momentum(), where, problems);
      const double d = number(g, "dampening", o.dampening(), where, problems);
      const double wd = number(g, "weight_decay", o.weight_decay(), where, problems);
      const bool n = flag(g, "nesterov", o.nesterov(), where, problems);
      return [&o, lr, m, d, wd, n] { o.lr(lr).momentum(m).dampening(d).weight_decay(wd).nesterov(n); };
    }
    case OptimizerKind::kAdam: {
      auto& o = static_cast<optim::AdamOptions&>(options);
      const auto b = betas(o.betas());
      const double eps = number(g, "eps", o.eps(), where, problems);
      const double wd = number(g, "weight_decay", o.weight_decay(), where, problems);
      const bool ams = flag(g, "amsgrad", o.amsgrad(), where, problems);
      return [&o, lr, b, eps, wd, ams] { o.lr(lr).betas(b).eps(eps).weight_decay(wd).amsgrad(ams); };
    }
    case OptimizerKind::kAdamW: {
      auto& o = static_cast<optim::AdamWOptions&>(options);
      const auto b = betas(o.betas());
      const double eps = number(g, "eps", o.eps(), where, problems);
      const double wd = number(g, "weight_decay", o.weight_decay(), where, problems);
      const bool ams = flag(g, "amsgrad", o.amsgrad(), where, problems);
      return [&o, lr, b, eps, wd, ams] { o.lr(lr).betas(b).eps(eps).weight_decay(wd).amsgrad(ams); };
    }
    case OptimizerKind::kRMSprop: {
      auto& o = static_cast<optim::RMSpropOptions&>(options);
      const double alpha = number(g, "alpha", o.alpha(), where, problems);
      const double eps = number(g, "eps", o.eps(), where, problems);
      const double wd = number(g, "weight_decay", o.weight_decay(), where, problems);
      const double m = number(g, "momentum", o.momentum(), where, problems);
      const bool c = flag(g, "centered", o.centered(), where, problems);
      return
          [&o, lr, alpha, eps, wd, m, c] { o.lr(lr).alpha(alpha).eps(eps).weight_decay(wd).momentum(m).centered(c); };
    }
    case OptimizerKind::kAdagrad: {
      auto& o = static_cast<optim::AdagradOptions&>(options);
      const double decay = number(g, "lr_decay", o.lr_decay(), where, problems);
      const double eps = number(g, "eps", o.eps(), where, problems);
      const double wd = number(g, "weight_decay", o.weight_decay(), where, problems);
      const double init = number(g, "initial_accumulator_value", o.initial_accumulator_value(), where, problems);
      return [&o, lr, decay, eps, wd, init] {
        o.lr(lr).lr_decay(decay).eps(eps).weight_decay(wd).initial_accumulator_value(init);
      };
    }
    case OptimizerKind::kLBFGS: {
      auto& o = static_cast<optim::LBFGSOptions&>(options);
      auto count = [&](const char* key, int64_t fallback) {
        const double v = number(g, key, static_cast<double>(fallback), where, problems);
        if (!(v >= 1) || v != std::floor(v) || v > 9.0e15) {
          problems.add(where + "." + key + " is " + std::to_string(v) + ", not a whole number of at least 1");
          return fallback;
        }
        return static_cast<int64_t>(v);
      };
      const int64_t max_iter = count("max_iter", o.max_iter());
      const int64_t max_eval = count("max_eval", o.max_eval() ? *o.max_eval() : max_iter * 5 / 4);
      const int64_t history = count("history_size", o.history_size());
      const double tg = number(g, "tolerance_grad", o.tolerance_grad(), where, problems);
      const double tc = number(g, "tolerance_change", o.tolerance_change(), where, problems);
      auto search = o.line_search_fn();  // c10::optional in LibTorch 1.13, std::optional in 2.x
      if (g.contains("line_search_fn")) {
        const json& f = g["line_search_fn"];
        if (f.is_null()) {
          search.reset();
        } else if (f == "strong_wolfe") {
          search = std::string("strong_wolfe");
        } else {
          problems.add(where + ".line_search_fn is " + f.dump(-1, ' ', false, json::error_handler_t::replace) +
                       ", not None or 'strong_wolfe' (the line searches LBFGS has)");
        }
      }
      return [&o, lr, max_iter, max_eval, history, tg, tc, search] {
        o.lr(lr).max_iter(max_iter).max_eval(max_eval).history_size(history).tolerance_grad(tg).tolerance_change(tc);
        o.line_search_fn(search);
      };
    }
    case OptimizerKind::kOther:
      break;
  }
  return [] {};
}

int64_t numel_of(const std::vector<optim::OptimizerParamGroup>& groups) {
  int64_t n = 0;
  for (const auto& g : groups) {
    for (const auto& p : g.params()) n += p.numel();
  }
  return n;
}

/// LBFGS keeps one state for all parameters, under the first (PyTorch: state[<first index>]), over the
/// parameters flattened into one vector: d, prev_flat_grad and the history old_dirs / old_stps of that
/// length, ro, al (history_size entries, None until used) and H_diag scalars, func_evals, n_iter, t, prev_loss.
void dump_lbfgs_state(const optim::LBFGSParamState& s, size_t index, int64_t p, json& entries, Checkpoint& checkpoint) {
  auto put = [&](const std::string& name, const at::Tensor& t) {
    if (t.defined()) checkpoint.tensors[tensor_key(index, p, name)] = t;
  };
  entries["func_evals"] = s.func_evals();
  entries["n_iter"] = s.n_iter();
  entries["t"] = s.t();
  entries["prev_loss"] = s.prev_loss();
  put("d", s.d());
  put("H_diag", s.H_diag());
  put("prev_flat_grad", s.prev_flat_grad());
  auto list = [&](const char* name, const auto& tensors) {
    // The list's length in the metadata (None where a tensor is undefined); its tensors as "<name>.<k>".
    entries[name] = json::array_t(tensors.size(), nullptr);
    size_t k = 0;
    for (const auto& t : tensors) put(std::string(name) + "." + std::to_string(k++), t);
  };
  list("old_dirs", s.old_dirs());
  list("old_stps", s.old_stps());
  list("ro", s.ro());
  if (s.al()) list("al", *s.al());
}

/// The LBFGS state a file holds for its first parameter (`file_p`), checked: nullptr with `problems` added.
std::unique_ptr<optim::LBFGSParamState> read_lbfgs_state(const Checkpoint& checkpoint, size_t index,
                                                         const std::string& file_p, const json& entries,
                                                         const at::Tensor& first, int64_t flat, int64_t history,
                                                         const std::string& at, Problems& problems) {
  const size_t before = problems.list.size();
  auto st = std::make_unique<optim::LBFGSParamState>();
  auto whole = [&](const char* key) -> int64_t {
    const json v = entries.is_object() && entries.contains(key) ? entries[key] : json();
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      problems.add(
          at + "." + key +
          (v.is_null() ? std::string(" is missing") : " is " + v.dump() + ", not a whole number of at least 0"));
      return 0;
    }
    return v.get<int64_t>();
  };
  auto real = [&](const char* key) -> double {
    json v = entries.is_object() && entries.contains(key) ? entries[key] : json();
    // PyTorch may keep it as a one-element tensor (t computed from a gradient).
    const auto t = checkpoint.tensors.find(tensor_key(index, std::stoll(file_p), key));
    if (v.is_null() && t != checkpoint.tensors.end() && t->second.numel() == 1 && t->second.is_floating_point()) {
      v = t->second.item<double>();
    }
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      problems.add(at + "." + key +
                   (v.is_null() ? std::string(" is missing") : " is " + v.dump() + ", not a finite number"));
      return 0;
    }
    return v.get<double>();
  };
  const std::vector<int64_t> vector_shape{flat};
  auto tensor = [&](const std::string& name, bool scalar, bool required) -> at::Tensor {
    const auto it = checkpoint.tensors.find(tensor_key(index, std::stoll(file_p), name));
    if (it == checkpoint.tensors.end()) {
      if (required) problems.add(at + "." + name + " is missing");
      return {};
    }
    const at::Tensor& t = it->second;
    const bool shape_ok = scalar ? t.numel() == 1 : t.sizes() == c10::IntArrayRef(vector_shape);
    if (!shape_ok || t.scalar_type() != first.scalar_type()) {
      std::ostringstream msg;
      msg << at << "." << name << " is " << c10::toString(t.scalar_type()) << " " << t.sizes() << ", not "
          << c10::toString(first.scalar_type()) << " "
          << (scalar ? std::string("[] (one value)") : "[" + std::to_string(flat) + "] (the parameters' elements)");
      problems.add(msg.str());
      return {};
    }
    at::Tensor c = t.to(first.device(), /*non_blocking=*/false, /*copy=*/true);
    return scalar ? c.reshape({}) : c;
  };
  auto list = [&](const char* name, bool scalar, bool nones) {
    std::vector<at::Tensor> out;
    const json v = entries.is_object() && entries.contains(name) ? entries[name] : json();
    if (!v.is_array()) {
      problems.add(at + "." + name + (v.is_null() ? std::string(" is missing") : " is not a list"));
      return out;
    }
    if (static_cast<int64_t>(v.size()) > history) {
      problems.add(at + "." + name + " has " + std::to_string(v.size()) + " entries, more than history_size " +
                   std::to_string(history));
      return out;
    }
    for (size_t k = 0; k < v.size(); ++k)
      out.push_back(tensor(std::string(name) + "." + std::to_string(k), scalar, !nones));
    return out;
  };
  st->func_evals(whole("func_evals")).n_iter(whole("n_iter")).t(real("t")).prev_loss(real("prev_loss"));
  st->d(tensor("d", false, true))
      .H_diag(tensor("H_diag", true, true))
      .prev_flat_grad(tensor("prev_flat_grad", false, true));
  auto as_deque = [](std::vector<at::Tensor> v) { return std::deque<at::Tensor>(v.begin(), v.end()); };
  const auto dirs = list("old_dirs", false, false), stps = list("old_stps", false, false), ro = list("ro", true, false);
  if (dirs.size() != stps.size() || dirs.size() != ro.size()) {
    problems.add(at + " has " + std::to_string(dirs.size()) + " old_dirs, " + std::to_string(stps.size()) +
                 " old_stps and " + std::to_string(ro.size()) + " ro: a history holds as many of each");
  }
  st->old_dirs(as_deque(dirs)).old_stps(as_deque(stps)).ro(as_deque(ro));
  if (entries.is_object() && entries.contains("al")) {
    auto al = list("al", true, true);
    // LibTorch indexes al over history_size entries, as PyTorch keeps it.
    if (static_cast<int64_t>(al.size()) < history) al.resize(static_cast<size_t>(history));
    st->al(al);
  }
  if (problems.list.size() != before) return nullptr;
  return st;
}

}  // namespace

bool dump_pytorch_optimizer_state(const optim::Optimizer& optimizer, size_t index, Checkpoint& checkpoint) {
  const OptimizerKind kind = kind_of(optimizer);
  if (kind == OptimizerKind::kOther) return false;
  auto& opt = const_cast<optim::Optimizer&>(optimizer);  // state() has no const overload worth the name in 1.13
  json state = json::object();
  json groups = json::array();
  int64_t p = 0;
  for (const auto& group : opt.param_groups()) {
    json g = group_options(kind, group.options());
    json params = json::array();
    for (const auto& param : group.params()) {
      params.push_back(p);
      const auto it = opt.state().find(state_key<StateMap>(param));
      if (kind == OptimizerKind::kLBFGS) {
        // One state, under the first parameter (LibTorch keys it there too).
        if (p == 0 && it != opt.state().end()) {
          json entries = json::object();
          dump_lbfgs_state(static_cast<const optim::LBFGSParamState&>(*it->second), index, p, entries, checkpoint);
          state[std::to_string(p)] = entries;
        }
        ++p;
        continue;
      }
      if (it != opt.state().end()) {
        json entries = json::object();
        auto put = [&](const char* name, const at::Tensor& t) {
          if (t.defined()) checkpoint.tensors[tensor_key(index, p, name)] = t;
        };
        const auto* s = it->second.get();
        switch (kind) {
          case OptimizerKind::kSGD:
            put("momentum_buffer", static_cast<const optim::SGDParamState*>(s)->momentum_buffer());
            break;
          case OptimizerKind::kAdam: {
            const auto* a = static_cast<const optim::AdamParamState*>(s);
            put("step", step_tensor(a->step()));
            put("exp_avg", a->exp_avg());
            put("exp_avg_sq", a->exp_avg_sq());
            put("max_exp_avg_sq", a->max_exp_avg_sq());
            break;
          }
          case OptimizerKind::kAdamW: {
            const auto* a = static_cast<const optim::AdamWParamState*>(s);
            put("step", step_tensor(a->step()));
            put("exp_avg", a->exp_avg());
            put("exp_avg_sq", a->exp_avg_sq());
            put("max_exp_avg_sq", a->max_exp_avg_sq());
            break;
          }
          case OptimizerKind::kRMSprop: {
            const auto* r = static_cast<const optim::RMSpropParamState*>(s);
            entries["step"] = r->step();
            put("square_avg", r->square_avg());
            put("momentum_buffer", r->momentum_buffer());
            put("grad_avg", r->grad_avg());
            break;
          }
          case OptimizerKind::kAdagrad: {
            const auto* a = static_cast<const optim::AdagradParamState*>(s);
            put("step", step_tensor(a->step()));
            put("sum", a->sum());
            break;
          }
          case OptimizerKind::kLBFGS:
          case OptimizerKind::kOther:
            break;
        }
        state[std::to_string(p)] = entries;
      }
      ++p;
    }
    g["params"] = params;
    groups.push_back(g);
  }
  json& list = checkpoint.meta["optimizer_states"];
  if (!list.is_array()) list = json::array();
  while (list.size() <= index) list.push_back(nullptr);
  list[index] = {{"state", state}, {"param_groups", groups}};
  return true;
}

bool has_pytorch_optimizer_state(const Checkpoint& checkpoint, size_t index) {
  const json& meta = checkpoint.meta;
  if (!meta.is_object() || !meta.contains("optimizer_states")) return false;
  const json& list = meta["optimizer_states"];
  return list.is_array() && index < list.size() && list[index].is_object() && list[index].contains("param_groups");
}

void load_pytorch_optimizer_state(optim::Optimizer& optimizer, size_t index, const Checkpoint& checkpoint,
                                  const std::string& path) {
  const std::string label = "optimizer_states[" + std::to_string(index) + "]";
  const OptimizerKind kind = kind_of(optimizer);
  const std::string file = "checkpoint " + quote_path(path);
  if (kind == OptimizerKind::kOther) {
    throw CheckpointError(file + " holds " + label +
                          " in PyTorch's layout, which Volt restores into SGD, Adam, AdamW, RMSprop, Adagrad and "
                          "LBFGS; "
                          "this optimizer is none of them. Resume with the optimizer that wrote it.");
  }
  const json& entry = checkpoint.meta["optimizer_states"][index];
  const json& groups = entry["param_groups"];
  const json state = entry.value("state", json::object());
  Problems problems;
  auto& own_groups = optimizer.param_groups();
  if (!groups.is_array() || groups.size() != own_groups.size()) {
    throw CheckpointError(file + " has " + std::to_string(groups.is_array() ? groups.size() : 0) +
                          " parameter group(s) in " + label + " but the optimizer has " +
                          std::to_string(own_groups.size()) +
                          "; configure_optimizers returns a different optimizer than when it was written.");
  }
  std::vector<std::function<void()>> apply;
  std::vector<std::pair<at::Tensor, std::unique_ptr<optim::OptimizerParamState>>> states;
  int64_t p = 0;
  for (size_t gi = 0; gi < own_groups.size(); ++gi) {
    const std::string where = label + ".param_groups[" + std::to_string(gi) + "]";
    const json& g = groups[gi];
    if (!g.is_object()) {
      problems.add(where + " is not a dict");
      continue;
    }
    const size_t n = g.contains("params") && g["params"].is_array() ? g["params"].size() : 0;
    if (n != own_groups[gi].params().size()) {
      problems.add(where + " has " + std::to_string(n) + " parameters, the optimizer's group " +
                   std::to_string(own_groups[gi].params().size()));
      continue;
    }
    apply.push_back(set_options(kind, own_groups[gi].options(), g, where, problems));
    for (size_t k = 0; k < n; ++k) {
      const at::Tensor& param = own_groups[gi].params()[k];
      // PyTorch numbers the parameters of a state_dict in order; the file's own ids name its state entries.
      const json& id = g["params"][k];
      const std::string file_p = id.is_number_integer() ? std::to_string(id.get<int64_t>()) : std::to_string(p);
      const std::string at = label + ".state[" + file_p + "]";
      auto tensor = [&](const char* name, bool required) -> at::Tensor {
        const auto it = checkpoint.tensors.find(tensor_key(index, std::stoll(file_p), name));
        if (it == checkpoint.tensors.end()) {
          if (required) problems.add(at + "." + name + " is missing");
          return {};
        }
        const at::Tensor& t = it->second;
        if (t.sizes() != param.sizes() || t.scalar_type() != param.scalar_type()) {
          std::ostringstream msg;
          msg << at << "." << name << " is " << c10::toString(t.scalar_type()) << " " << t.sizes() << ", its parameter "
              << c10::toString(param.scalar_type()) << " " << param.sizes();
          problems.add(msg.str());
          return {};
        }
        // Its own memory on the parameter's device: the file's mapping is released after the resume.
        return t.to(param.device(), /*non_blocking=*/false, /*copy=*/true);
      };
      auto step = [&]() -> int64_t {
        const auto it = checkpoint.tensors.find(tensor_key(index, std::stoll(file_p), "step"));
        double v = -1;
        if (it != checkpoint.tensors.end() && it->second.numel() == 1) {
          v = it->second.item<double>();
        } else if (state.contains(file_p) && state[file_p].is_object() && state[file_p].contains("step") &&
                   state[file_p]["step"].is_number()) {
          v = state[file_p]["step"].get<double>();
        } else {
          problems.add(at + ".step is missing");
          return 0;
        }
        if (!(v >= 0) || v != std::floor(v) || v > 9.0e15) {
          problems.add(at + ".step is " + std::to_string(v) + ", not a whole number of at least 0");
          return 0;
        }
        return static_cast<int64_t>(v);
      };
      const bool has_state = (state.contains(file_p) && state[file_p].is_object()) ||
                             checkpoint.tensors.count(tensor_key(index, std::stoll(file_p), "step")) ||
                             checkpoint.tensors.count(tensor_key(index, std::stoll(file_p), "momentum_buffer"));
      ++p;
      if (kind == OptimizerKind::kLBFGS) {
        // One state for all parameters, under the first; the others have none.
        if (gi == 0 && k == 0 && state.contains(file_p)) {
          const auto& o = static_cast<const optim::LBFGSOptions&>(own_groups[gi].options());
          const double h = g.contains("history_size") && g["history_size"].is_number()
                               ? g["history_size"].get<double>()
                               : static_cast<double>(o.history_size());
          auto st = read_lbfgs_state(checkpoint, index, file_p, state[file_p], param, numel_of(own_groups),
                                     h >= 1 && h < 9.0e15 ? static_cast<int64_t>(h) : o.history_size(), at, problems);
          if (st) states.emplace_back(param, std::move(st));
        }
        continue;
      }
      if (!has_state) continue;  // a parameter that has not stepped yet
      std::unique_ptr<optim::OptimizerParamState> s;
      switch (kind) {
        case OptimizerKind::kSGD: {
          at::Tensor buf = tensor("momentum_buffer", false);
          if (!buf.defined()) continue;  // PyTorch keeps None there without momentum
          auto st = std::make_unique<optim::SGDParamState>();
          st->momentum_buffer(buf);
          s = std::move(st);
          break;
        }
        case OptimizerKind::kAdam:
        case OptimizerKind::kAdamW: {
          const bool ams = g.value("amsgrad", false) == true;
          const int64_t n_step = step();
          at::Tensor m = tensor("exp_avg", true), v = tensor("exp_avg_sq", true);
          at::Tensor mx = ams ? tensor("max_exp_avg_sq", true) : at::Tensor();
          if (kind == OptimizerKind::kAdam) {
            auto st = std::make_unique<optim::AdamParamState>();
            st->step(n_step).exp_avg(m).exp_avg_sq(v).max_exp_avg_sq(mx);
            s = std::move(st);
          } else {
            auto st = std::make_unique<optim::AdamWParamState>();
            st->step(n_step).exp_avg(m).exp_avg_sq(v).max_exp_avg_sq(mx);
            s = std::move(st);
          }
          break;
        }
        case OptimizerKind::kRMSprop: {
          auto st = std::make_unique<optim::RMSpropParamState>();
          st->step(step()).square_avg(tensor("square_avg", true));
          if (number(g, "momentum", 0, label, problems) > 0) st->momentum_buffer(tensor("momentum_buffer", true));
          if (g.value("centered", false) == true) st->grad_avg(tensor("grad_avg", true));
          s = std::move(st);
          break;
        }
        case OptimizerKind::kAdagrad: {
          auto st = std::make_unique<optim::AdagradParamState>();
          st->step(step()).sum(tensor("sum", true));
          s = std::move(st);
          break;
        }
        case OptimizerKind::kLBFGS:
        case OptimizerKind::kOther:
          break;
      }
      states.emplace_back(param, std::move(s));
    }
  }
  if (!problems.list.empty()) {
    std::string msg = file + " holds optimizer state that does not fit optimizer " + std::to_string(index) + ":";
    for (size_t i = 0; i < problems.list.size(); ++i) msg += (i ? "; " : " ") + problems.list[i];
    throw CheckpointError(msg + ". Nothing was restored; resume with the model and optimizer that wrote it.");
  }
  for (auto& f : apply) f();
  auto& own_state = optimizer.state();
  for (const auto& group : own_groups) {
    for (const auto& param : group.params()) own_state.erase(state_key<StateMap>(param));
  }
  for (auto& [param, s] : states) own_state[state_key<StateMap>(param)] = std::move(s);
}

}  // namespace volt::checkpoint_io
