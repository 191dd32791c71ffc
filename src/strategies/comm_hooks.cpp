// The plain and compressing communication hooks, the c10d adapter and the option checks;
// PowerSGD is in comm_hooks_powersgd.cpp.
#include "volt/strategies/comm_hooks.h"

#include <cmath>

#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>

#include "strategies/detail/comm_hooks_impl.h"
#include "volt/core/error.h"

namespace volt::strategies {

void CommHook::setup(const c10::intrusive_ptr<c10d::ProcessGroup>& group, const std::vector<at::Tensor>&) {
  group_ = group;
}

int64_t CommHook::world_size() const {
  return group_ ? group_->getSize() : 1;
}

namespace {

/// PyTorch's allreduce_hook, with the Reducer's own arithmetic: each gradient times 1/world_size
/// (the Reducer multiplies by the reciprocal as it fills the bucket), then a sum allreduce. So
/// the result is bitwise the Reducer's without a hook.
class AllreduceHook : public CommHook {
 public:
  std::string name() const override { return "allreduce"; }
  c10::intrusive_ptr<c10::ivalue::Future> run_hook(c10d::GradBucket& bucket) override {
    at::Tensor buffer = bucket.getBufferRef();
    buffer.mul_(1.0 / static_cast<double>(world_size()));
    std::vector<at::Tensor> tensors{buffer};
    return group()->allreduce(tensors)->getFuture()->then(
        [buffer](c10::ivalue::Future&) { return c10::IValue(buffer); }, c10::TensorType::get());
  }
};

/// PyTorch's fp16_compress_hook: the bucket rounded to float16, divided by the world size (in
/// float16, before the sum, so that the sum cannot overflow where the mean does not), summed by
/// Gloo in float16, and copied back into the bucket's dtype. Half the bytes of float32.
class Fp16CompressHook : public CommHook {
 public:
  std::string name() const override { return "fp16"; }
  c10::intrusive_ptr<c10::ivalue::Future> run_hook(c10d::GradBucket& bucket) override {
    at::Tensor buffer = bucket.getBufferRef();
    at::Tensor compressed = buffer.to(at::kHalf).div_(static_cast<double>(world_size()));
    std::vector<at::Tensor> tensors{compressed};
    return group()->allreduce(tensors)->getFuture()->then(
        [buffer, compressed](c10::ivalue::Future&) {
          buffer.copy_(compressed);
          return c10::IValue(buffer);
        },
        c10::TensorType::get());
  }
};

/// PyTorch's bf16_compress_hook. Gloo (LibTorch 1.13) neither reduces nor moves bfloat16
/// ("Invalid scalar type"), and a float16 sum would lose bfloat16's range: each rank's rounded,
/// divided bucket is all-gathered as its 16-bit patterns (viewed as float16, which Gloo moves
/// without arithmetic), and every rank sums the world's copies in float32 in rank order, rounds
/// the sum to bfloat16 (the precision a bfloat16 allreduce gives) and copies it back. The same
/// bytes on the wire as a bfloat16 allreduce on 2 ranks; (world_size - 1) / 2 times them on more.
class Bf16CompressHook : public CommHook {
 public:
  std::string name() const override { return "bf16"; }
  c10::intrusive_ptr<c10::ivalue::Future> run_hook(c10d::GradBucket& bucket) override {
    at::Tensor buffer = bucket.getBufferRef();
    at::Tensor compressed = buffer.to(at::kBFloat16).div_(static_cast<double>(world_size()));
    std::vector<at::Tensor> in{compressed.view(at::kHalf)};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int64_t r = 0; r < world_size(); ++r) out[0].push_back(at::empty_like(in[0]));
    auto gathered = out[0];
    return group()->allgather(out, in)->getFuture()->then(
        [buffer, gathered](c10::ivalue::Future&) {
          at::Tensor sum = at::zeros(buffer.sizes(), buffer.options().dtype(at::kFloat));
          for (const auto& t : gathered) sum.add_(t.view(at::kBFloat16).to(at::kFloat));
          buffer.copy_(sum.to(at::kBFloat16));
          return c10::IValue(buffer);
        },
        c10::TensorType::get());
  }
};

/// The Reducer's side of a CommHook.
class Adapter : public c10d::CommHookInterface {
 public:
  explicit Adapter(std::shared_ptr<CommHook> hook) : hook_(std::move(hook)) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override { return hook_->run_hook(bucket); }
  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  std::shared_ptr<CommHook> hook_;
};

std::string known_list() {
  std::string s;
  const auto& names = comm_hook_names();
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

std::string num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

const std::vector<std::string>& comm_hook_names() {
  static const std::vector<std::string> names{"allreduce", "fp16", "bf16", "powersgd"};
  return names;
}

void check_comm_hook(const std::string& name, const PowerSGDOptions& p, const std::string& where) {
  if (name.empty()) return;
  bool known = false;
  for (const auto& n : comm_hook_names()) known = known || n == name;
  if (!known) {
    throw ConfigError(where + "='" + name + "' is not a known communication hook. Use " + known_list() +
                      " (or leave it empty for c10d's own averaging allreduce; a C++ hook of your own goes in "
                      "DDPOptions::comm_hook_object).");
  }
  if (name != "powersgd") return;
  // The flag table's names on the command line, the struct's in C++.
  const std::string pre = where.rfind("ddp.", 0) == 0 ? "ddp.powersgd_" : "PowerSGDOptions::";
  const std::string at = " (" + where + "=powersgd)";
  if (p.matrix_approximation_rank < 1 || p.matrix_approximation_rank > 1024) {
    throw ConfigError(pre + "matrix_approximation_rank=" + std::to_string(p.matrix_approximation_rank) + at +
                      " must be in [1, 1024]; PyTorch suggests 1, 2, 4, ... (default 1).");
  }
  if (p.start_powerSGD_iter < 0) {
    throw ConfigError(pre + "start_powerSGD_iter=" + std::to_string(p.start_powerSGD_iter) + at +
                      " is negative. Use 0 (compress from the first step) or a number of plain steps (default 1000).");
  }
  if (!std::isfinite(p.min_compression_rate) || p.min_compression_rate < 0) {
    throw ConfigError(pre + "min_compression_rate=" + num(p.min_compression_rate) + at +
                      " must be a finite number of at least 0 (default 2; 0 compresses every matrix).");
  }
  if (!std::isfinite(p.orthogonalization_epsilon) || p.orthogonalization_epsilon < 0) {
    throw ConfigError(pre + "orthogonalization_epsilon=" + num(p.orthogonalization_epsilon) + at +
                      " must be a finite number of at least 0 (default 0; 1e-8 guards all-zero columns).");
  }
}

std::shared_ptr<CommHook> make_comm_hook(const std::string& name, const PowerSGDOptions& powersgd) {
  check_comm_hook(name.empty() ? std::string("(empty)") : name, powersgd, "comm_hook");
  if (name == "allreduce") return std::make_shared<AllreduceHook>();
  if (name == "fp16") return std::make_shared<Fp16CompressHook>();
  if (name == "bf16") return std::make_shared<Bf16CompressHook>();
  return detail::make_powersgd_hook(powersgd);
}

std::unique_ptr<c10d::CommHookInterface> to_c10d_comm_hook(std::shared_ptr<CommHook> hook) {
  return std::make_unique<Adapter>(std::move(hook));
}

}  // namespace volt::strategies
