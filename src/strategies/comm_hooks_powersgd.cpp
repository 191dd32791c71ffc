// PowerSGD (Vogels, Karimireddy and Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression
// for Distributed Optimization", NeurIPS 2019) as PyTorch's powerSGD_hook runs it: one step of
// power iteration per optimizer step on each gradient matrix M (n x m), P = M Q summed across
// ranks and orthogonalized, Q = M^T P averaged, M replaced by P Q^T; with warm-up steps of plain
// allreduce, error feedback and warm start of Q.
//
// Where this differs from PyTorch (docs/distributed.md): the state (error feedback, Q) is kept per
// parameter, not per bucket, so that the Reducer's bucket rebuild after the first step cannot mix
// it up (PyTorch needs start_powerSGD_iter >= 2 for that reason; here 0 and 1 are allowed) and a
// resume is bitwise exact whatever buckets the resumed Reducer starts with; a random Q is drawn
// from a generator seeded by (random_seed, step, parameter), the same on every rank and after a
// resume; 1-D tensors are never compressed (PyTorch compresses a vector of n elements when
// min_compression_rate < n / (n + 1)); orthogonalization is always Gram-Schmidt (PyTorch takes QR
// for rank > 2), and a zero column stays zero instead of becoming NaN.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/sum.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "strategies/detail/comm_hooks_impl.h"
#include "volt/core/error.h"

namespace volt::strategies::detail {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Modified Gram-Schmidt on the columns of `m` (n x r, r <= n), in place.
void orthogonalize(at::Tensor m, double epsilon) {
  const int64_t cols = m.size(1);
  for (int64_t i = 0; i < cols; ++i) {
    at::Tensor col = m.narrow(1, i, 1);
    at::Tensor norm = col.norm(2, {0}, /*keepdim=*/true);
    if (epsilon != 0.0) norm.add_(epsilon);
    // A zero column (a zero gradient) divided by its zero norm would be NaN; it stays zero.
    norm.clamp_min_(std::numeric_limits<float>::min());
    col.div_(norm);
    if (i + 1 < cols) {
      at::Tensor rest = m.narrow(1, i + 1, cols - i - 1);
      rest.sub_(at::sum(col * rest, {0}, /*keepdim=*/true) * col);
    }
  }
}

c10::intrusive_ptr<c10::ivalue::Future> completed(const at::Tensor& t) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  future->markCompleted(c10::IValue(t));
  return future;
}

class PowerSGDHook : public CommHook {
 public:
  explicit PowerSGDHook(PowerSGDOptions o) : o_(o) {}
  std::string name() const override { return "powersgd"; }

  void setup(const c10::intrusive_ptr<c10d::ProcessGroup>& group, const std::vector<at::Tensor>& parameters) override {
    CommHook::setup(group, parameters);
    index_.clear();
    for (size_t i = 0; i < parameters.size(); ++i)
      index_[parameters[i].unsafeGetTensorImpl()] = static_cast<int64_t>(i);
  }

  c10::intrusive_ptr<c10::ivalue::Future> run_hook(c10d::GradBucket& bucket) override {
    at::Tensor buffer = bucket.getBufferRef();
    const double ws = static_cast<double>(world_size());
    if (iter_ < o_.start_powerSGD_iter) {
      // Warm-up: the Reducer's own averaging (times 1/world_size, sum), bitwise.
      if (bucket.isLast()) ++iter_;
      buffer.mul_(1.0 / ws);
      std::vector<at::Tensor> tensors{buffer};
      return group()->allreduce(tensors)->getFuture()->then(
          [buffer](c10::ivalue::Future&) { return c10::IValue(buffer); }, c10::TensorType::get());
    }
    const std::vector<at::Tensor> params = bucket.getParameters();
    const std::vector<at::Tensor> grads = bucket.getGradients();
    std::vector<int64_t> ids(grads.size());
    for (size_t k = 0; k < grads.size(); ++k) {
      auto it = index_.find(params[k].unsafeGetTensorImpl());
      if (it == index_.end()) throw Error("PowerSGD: a gradient bucket holds a parameter the hook was not set up with");
      ids[k] = it->second;
    }
    // Error feedback: this rank's gradient plus what compression lost of it last step.
    std::vector<at::Tensor> before;
    if (o_.use_error_feedback) {
      for (size_t k = 0; k < grads.size(); ++k) {
        auto e = error_.find(ids[k]);
        if (e != error_.end() && e->second.numel() == grads[k].numel()) grads[k].add_(e->second.view_as(grads[k]));
        before.push_back(grads[k].clone());
      }
    }
    struct Matrix {
      at::Tensor m;  // n x m view of the gradient in the bucket
      int64_t id, rank;
      at::Tensor p, q;
    };
    std::vector<Matrix> compress;
    std::vector<at::Tensor> plain;
    int64_t p_size = 0, q_size = 0;
    for (size_t k = 0; k < grads.size(); ++k) {
      const at::Tensor& g = grads[k];
      if (g.dim() >= 2) {
        at::Tensor m = g.view({g.size(0), -1});
        const int64_t n = m.size(0), cols = m.size(1);
        const int64_t r = std::min({n, cols, o_.matrix_approximation_rank});
        if (static_cast<double>((n + cols) * r) * o_.min_compression_rate < static_cast<double>(n * cols)) {
          compress.push_back({m, ids[k], r, {}, {}});
          p_size += n * r;
          q_size += cols * r;
          continue;
        }
      }
      plain.push_back(g);
    }
    c10::intrusive_ptr<c10d::Work> plain_work;
    at::Tensor plain_flat;
    if (!plain.empty()) {
      std::vector<at::Tensor> flat;
      for (const auto& t : plain) flat.push_back(t.reshape({-1}));
      plain_flat = at::cat(flat);
      std::vector<at::Tensor> v{plain_flat};
      plain_work = group()->allreduce(v);
    }
    if (!compress.empty()) {
      const auto opts = buffer.options();
      at::Tensor p_flat = at::empty({p_size}, opts), q_flat = at::empty({q_size}, opts);
      int64_t po = 0, qo = 0;
      for (auto& c : compress) {
        const int64_t n = c.m.size(0), cols = c.m.size(1);
        c.p = p_flat.narrow(0, po, n * c.rank).view({n, c.rank});
        c.q = q_flat.narrow(0, qo, cols * c.rank).view({cols, c.rank});
        po += n * c.rank;
        qo += cols * c.rank;
        auto kept = q_.find(c.id);
        if (o_.warm_start && kept != q_.end() && kept->second.sizes() == c.q.sizes()) {
          c.q.copy_(kept->second);
        } else {
          const uint64_t seed = splitmix64(o_.random_seed ^ splitmix64(static_cast<uint64_t>(iter_) * 0x100000001B3ull +
                                                                       static_cast<uint64_t>(c.id)));
          at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
          c.q.copy_(at::randn({cols, c.rank}, gen, opts.dtype(at::kFloat)));
        }
        orthogonalize(c.q, o_.orthogonalization_epsilon);
        at::mm_out(c.p, c.m, c.q);
      }
      std::vector<at::Tensor> pv{p_flat};
      auto p_work = group()->allreduce(pv);
      finish_plain(plain_work, plain_flat, plain, ws);
      p_work->wait();
      for (auto& c : compress) {
        orthogonalize(c.p, o_.orthogonalization_epsilon);
        at::mm_out(c.q, c.m.t(), c.p);
      }
      std::vector<at::Tensor> qv{q_flat};
      group()->allreduce(qv)->wait();
      q_flat.div_(ws);
      for (auto& c : compress) at::mm_out(c.m, c.p, c.q.t());
      if (o_.warm_start) {
        for (auto& c : compress) q_[c.id] = c.q;
      }
    } else {
      finish_plain(plain_work, plain_flat, plain, ws);
    }
    if (o_.use_error_feedback) {
      for (size_t k = 0; k < grads.size(); ++k) error_[ids[k]] = (before[k] - grads[k]).reshape({-1});
    }
    if (!o_.warm_start) q_.clear();
    if (bucket.isLast()) ++iter_;
    return completed(buffer);
  }

  std::map<std::string, at::Tensor> state_dict() const override {
    std::map<std::string, at::Tensor> s;
    s["iter"] = at::full({1}, iter_, at::kLong);
    for (const auto& [id, e] : error_) s["error." + std::to_string(id)] = e;
    for (const auto& [id, q] : q_) s["q." + std::to_string(id)] = q;
    return s;
  }

  void load_state_dict(const std::map<std::string, at::Tensor>& state) override {
    error_.clear();
    q_.clear();
    for (const auto& [key, t] : state) {
      if (key == "iter") {
        iter_ = t.item<int64_t>();
      } else if (key.rfind("error.", 0) == 0) {
        error_[std::stoll(key.substr(6))] = t.clone();
      } else if (key.rfind("q.", 0) == 0) {
        q_[std::stoll(key.substr(2))] = t.clone();
      }
    }
  }

 private:
  static void finish_plain(const c10::intrusive_ptr<c10d::Work>& work, const at::Tensor& flat,
                           const std::vector<at::Tensor>& plain, double ws) {
    if (!work) return;
    work->wait();
    flat.div_(ws);
    int64_t at = 0;
    for (const auto& t : plain) {
      t.copy_(flat.narrow(0, at, t.numel()).view_as(t));
      at += t.numel();
    }
  }

  PowerSGDOptions o_;
  std::unordered_map<const c10::TensorImpl*, int64_t> index_;
  int64_t iter_ = 0;
  std::map<int64_t, at::Tensor> error_;
  std::map<int64_t, at::Tensor> q_;
};

}  // namespace

std::shared_ptr<CommHook> make_powersgd_hook(const PowerSGDOptions& options) {
  return std::make_shared<PowerSGDHook>(options);
}

}  // namespace volt::strategies::detail
