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
//
// Schedule: a bucket's hook (on the backward thread) adds the error feedback, computes P = M Q and
// starts ONE allreduce of [uncompressed tensors | every P] (PyTorch starts two), then returns; the rest
// runs in callbacks while the backward goes on: once the sum arrives, the uncompressed tensors are
// averaged, each P orthogonalized, Q = M^T P computed and Q's allreduce started; once that arrives,
// M = P Q^T and the error feedback. Two collectives per bucket, none waited for on the backward
// thread, except that a bucket's hook first waits until the previous bucket's Q allreduce has been
// started, so every rank starts its collectives in the same order on the one process group.
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

/// A compressed gradient matrix of a bucket.
struct Matrix {
  at::Tensor m;  ///< n x cols view of the gradient in the bucket
  int64_t rank;
  at::Tensor p, q;       ///< views into the round's buffers
  at::Tensor* kept_q;    ///< this parameter's Q for the warm start (an entry of the hook's map)
  int64_t id;            ///< the parameter's index
};

/// One bucket's compression, shared by the callbacks that finish it.
struct Round {
  at::Tensor buffer;
  std::vector<at::Tensor> grads, before, plain;
  std::vector<at::Tensor*> errors;  ///< this round's error feedback entries, per gradient
  std::vector<Matrix> compress;
  at::Tensor first, q_flat;  ///< [plain | P] and Q, each allreduced in one collective
  c10::intrusive_ptr<c10d::Work> q_work;
  double ws = 1.0;
};

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
    if (bucket.getIndex() == 0) previous_q_started_.reset();  // what a failed backward left
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
    auto round = std::make_shared<Round>();
    round->buffer = buffer;
    round->grads = grads;
    round->ws = ws;
    std::vector<int64_t> ids(grads.size());
    for (size_t k = 0; k < grads.size(); ++k) {
      auto it = index_.find(params[k].unsafeGetTensorImpl());
      if (it == index_.end()) throw Error("PowerSGD: a gradient bucket holds a parameter the hook was not set up with");
      ids[k] = it->second;
    }
    // Error feedback: this rank's gradient plus what compression lost of it last step. The state's map
    // entries are made here, on the backward thread; the callbacks (on the process group's threads) only
    // write through pointers to them.
    if (o_.use_error_feedback) {
      for (size_t k = 0; k < grads.size(); ++k) {
        at::Tensor& e = error_[ids[k]];
        if (e.defined() && e.numel() == grads[k].numel()) grads[k].add_(e.view_as(grads[k]));
        round->before.push_back(grads[k].clone());
        round->errors.push_back(&e);
      }
    }
    int64_t plain_size = 0, p_size = 0, q_size = 0;
    for (size_t k = 0; k < grads.size(); ++k) {
      const at::Tensor& g = grads[k];
      if (g.dim() >= 2) {
        at::Tensor m = g.view({g.size(0), -1});
        const int64_t n = m.size(0), cols = m.size(1);
        const int64_t r = std::min({n, cols, o_.matrix_approximation_rank});
        if (static_cast<double>((n + cols) * r) * o_.min_compression_rate < static_cast<double>(n * cols)) {
          round->compress.push_back({m, r, {}, {}, &q_[ids[k]], ids[k]});
          p_size += n * r;
          q_size += cols * r;
          continue;
        }
      }
      round->plain.push_back(g);
      plain_size += g.numel();
    }
    // One allreduce carries the uncompressed tensors and every P of the bucket: [plain | P].
    const auto opts = buffer.options();
    round->first = at::empty({plain_size + p_size}, opts);
    round->q_flat = at::empty({q_size}, opts);
    int64_t at = 0;
    for (const auto& t : round->plain) {
      round->first.narrow(0, at, t.numel()).copy_(t.reshape({-1}));
      at += t.numel();
    }
    int64_t qo = 0;
    for (auto& c : round->compress) {
      const int64_t n = c.m.size(0), cols = c.m.size(1);
      c.p = round->first.narrow(0, at, n * c.rank).view({n, c.rank});
      c.q = round->q_flat.narrow(0, qo, cols * c.rank).view({cols, c.rank});
      at += n * c.rank;
      qo += cols * c.rank;
      const at::Tensor& kept = *c.kept_q;
      if (o_.warm_start && kept.defined() && kept.sizes() == c.q.sizes()) {
        c.q.copy_(kept);
      } else {
        // A random start, the same on every rank and after a resume: seeded by (seed, step, parameter).
        const uint64_t seed = splitmix64(o_.random_seed ^ splitmix64(static_cast<uint64_t>(iter_) * 0x100000001B3ull +
                                                                     static_cast<uint64_t>(c.id)));
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
        c.q.copy_(at::randn({cols, c.rank}, gen, opts.dtype(at::kFloat)));
      }
      orthogonalize(c.q, o_.orthogonalization_epsilon);
      at::mm_out(c.p, c.m, c.q);
    }
    // Every rank starts its collectives in the same order on this one process group: bucket k-1's Q
    // (started by a callback once its P arrived) goes before bucket k's [plain | P].
    if (previous_q_started_) {
      previous_q_started_->wait();
      previous_q_started_.reset();
    }
    std::vector<at::Tensor> first{round->first};
    auto first_done = group()->allreduce(first)->getFuture();
    const PowerSGDOptions o = o_;
    // Not an owning pointer: this callback may be destroyed last on the group's own worker thread,
    // after the Reducer saw the bucket's future done and the strategy let the group go; owning it
    // there ran ~ProcessGroupGloo on that thread, which joins itself ("Resource deadlock avoided",
    // SIGABRT at the end of a fit whose last bucket had no matrix to compress). The group outlives
    // every bucket's future: the Reducer waits for them before the backward returns.
    c10d::ProcessGroup* group_ptr = group().get();
    // Once [plain | P] is summed: the plain tensors averaged, each P orthogonalized, Q = M^T P, and Q's
    // allreduce started (still on this bucket, so a caller may wait for this bucket's future alone).
    auto q_started = first_done->then(
        [round, o, group_ptr](c10::ivalue::Future&) {
          int64_t off = 0;
          for (const auto& t : round->plain) {
            t.copy_(round->first.narrow(0, off, t.numel()).view_as(t).div(round->ws));
            off += t.numel();
          }
          if (!round->compress.empty()) {
            for (auto& c : round->compress) {
              orthogonalize(c.p, o.orthogonalization_epsilon);
              at::mm_out(c.q, c.m.t(), c.p);
            }
            std::vector<at::Tensor> q{round->q_flat};
            round->q_work = group_ptr->allreduce(q);
          }
          return c10::IValue();
        },
        c10::NoneType::get());
    previous_q_started_ = q_started;
    if (bucket.isLast()) previous_q_started_.reset();
    if (bucket.isLast()) ++iter_;
    return q_started->thenAsync(
        [round, o](c10::ivalue::Future&) -> c10::intrusive_ptr<c10::ivalue::Future> {
          // Q summed: averaged, M = P Q^T into the bucket, the error feedback and the warm start kept.
          auto finish = [round, o]() {
            if (!round->compress.empty()) {
              round->q_flat.div_(round->ws);
              for (auto& c : round->compress) at::mm_out(c.m, c.p, c.q.t());
              if (o.warm_start) {
                for (auto& c : round->compress) *c.kept_q = c.q;
              }
            }
            if (o.use_error_feedback) {
              for (size_t k = 0; k < round->grads.size(); ++k) {
                *round->errors[k] = (round->before[k] - round->grads[k]).reshape({-1});
              }
            }
            if (!o.warm_start) {
              for (auto& c : round->compress) *c.kept_q = at::Tensor();
            }
            return c10::IValue(round->buffer);
          };
          if (!round->q_work) return completed(finish().toTensor());
          return round->q_work->getFuture()->then([finish](c10::ivalue::Future&) { return finish(); },
                                                  c10::TensorType::get());
        },
        c10::TensorType::get());
  }

  std::map<std::string, at::Tensor> state_dict() const override {
    std::map<std::string, at::Tensor> s;
    s["iter"] = at::full({1}, iter_, at::kLong);
    for (const auto& [id, e] : error_) {
      if (e.defined()) s["error." + std::to_string(id)] = e;
    }
    for (const auto& [id, q] : q_) {
      if (q.defined()) s["q." + std::to_string(id)] = q;
    }
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
  PowerSGDOptions o_;
  /// Set until the previous bucket's Q allreduce has been started (by its callback).
  c10::intrusive_ptr<c10::ivalue::Future> previous_q_started_;
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
