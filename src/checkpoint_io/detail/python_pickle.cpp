#include "checkpoint_io/detail/python_pickle.h"

#include <cstdio>
#include <cstring>
#include <map>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/core/printable.h"

namespace volt::checkpoint_io::detail {

PyValuePtr PyValue::get(const std::string& key) const {
  for (const auto& [k, v] : dict) {
    if (k->kind == Kind::kString && k->s == key) return v;
  }
  return nullptr;
}

bool PyValue::is_string_keyed_dict() const {
  if (kind != Kind::kDict) return false;
  for (const auto& [k, v] : dict) {
    if (k->kind != Kind::kString) return false;
  }
  return true;
}

std::string kind_name(const PyValue& v) {
  switch (v.kind) {
    case PyValue::Kind::kNone:
      return "None";
    case PyValue::Kind::kBool:
      return "a boolean";
    case PyValue::Kind::kInt:
      return "an integer";
    case PyValue::Kind::kFloat:
      return "a float";
    case PyValue::Kind::kString:
      return "a string";
    case PyValue::Kind::kBytes:
      return "bytes";
    case PyValue::Kind::kList:
      return "a list";
    case PyValue::Kind::kTuple:
      return "a tuple";
    case PyValue::Kind::kDict:
      return "a dict";
    case PyValue::Kind::kTensor:
      return "a tensor";
    case PyValue::Kind::kObject:
      return "an object of class " + v.s;
  }
  return "a value";
}

namespace {

using Kind = PyValue::Kind;


/// The dtype a storage class names ("torch.FloatStorage"), or Undefined.
at::ScalarType storage_dtype(const std::string& cls) {
  static const std::map<std::string, at::ScalarType> kTypes = {{"torch.FloatStorage", at::kFloat},
                                                               {"torch.DoubleStorage", at::kDouble},
                                                               {"torch.HalfStorage", at::kHalf},
                                                               {"torch.BFloat16Storage", at::kBFloat16},
                                                               {"torch.LongStorage", at::kLong},
                                                               {"torch.IntStorage", at::kInt},
                                                               {"torch.ShortStorage", at::kShort},
                                                               {"torch.CharStorage", at::kChar},
                                                               {"torch.ByteStorage", at::kByte},
                                                               {"torch.BoolStorage", at::kBool},
                                                               {"torch.ComplexFloatStorage", at::kComplexFloat},
                                                               {"torch.ComplexDoubleStorage", at::kComplexDouble}};
  const auto it = kTypes.find(cls);
  return it == kTypes.end() ? at::ScalarType::Undefined : it->second;
}

class Reader {
 public:
  Reader(const unsigned char* p, size_t n, const StorageLoader& storage, const std::string& name)
      : p_(p), n_(n), storage_(storage), name_(name) {}

  PyValuePtr run() {
    while (i_ < n_) {
      at_ = i_;
      const unsigned char op = p_[i_++];
      switch (op) {
        case 0x80:
          take(1);
          break;  // PROTO
        case 0x95:
          take(8);
          break;     // FRAME
        case '.': {  // STOP
          if (stack_.size() != 1 || !marks_.empty())
            fail("stops with " + std::to_string(stack_.size()) + " values on the stack");
          return stack_.back();
        }
        case '(':
          marks_.push_back(stack_.size());
          break;
        case '}':
          push(make_value(Kind::kDict));
          break;
        case ']':
          push(make_value(Kind::kList));
          break;
        case ')':
          push(make_value(Kind::kTuple));
          break;
        case 'N':
          push(make_value(Kind::kNone));
          break;
        case 0x88:
        case 0x89: {
          auto v = make_value(Kind::kBool);
          v->b = op == 0x88;
          push(v);
          break;
        }
        case 'J':
          push_int(static_cast<int32_t>(le(take(4), 4)));
          break;
        case 'K':
          push_int(le(take(1), 1));
          break;
        case 'M':
          push_int(le(take(2), 2));
          break;
        case 0x8a: {  // LONG1
          const size_t len = le(take(1), 1);
          if (len > 8) fail("holds an integer of " + std::to_string(len) + " bytes, beyond 64 bits");
          const unsigned char* b = take(len);
          uint64_t v = len ? le(b, len) : 0;
          if (len > 0 && len < 8 && (b[len - 1] & 0x80)) v |= ~uint64_t{0} << (8 * len);  // sign-extend
          push_int(static_cast<int64_t>(v));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          const unsigned char* b = take(8);
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | b[k];
          auto v = make_value(Kind::kFloat);
          std::memcpy(&v->f, &bits, 8);
          push(v);
          break;
        }
        case 'X':
          push_text(Kind::kString, le(take(4), 4));
          break;
        case 0x8c:
          push_text(Kind::kString, le(take(1), 1));
          break;
        case 0x8d:
          push_text(Kind::kString, le(take(8), 8));
          break;
        case 'T':
          push_text(Kind::kBytes, le(take(4), 4));
          break;
        case 'U':
          push_text(Kind::kBytes, le(take(1), 1));
          break;
        case 'B':
          push_text(Kind::kBytes, le(take(4), 4));
          break;
        case 'C':
          push_text(Kind::kBytes, le(take(1), 1));
          break;
        case 0x8e:
          push_text(Kind::kBytes, le(take(8), 8));
          break;
        case 'q':
          memo_put(le(take(1), 1));
          break;
        case 'r':
          memo_put(le(take(4), 4));
          break;
        case 0x94:
          memo_put(memo_.size());
          break;
        case 'h':
          memo_get(le(take(1), 1));
          break;
        case 'j':
          memo_get(le(take(4), 4));
          break;
        case 'c': {  // GLOBAL "module\nname\n"
          const std::string module = line(), cls = line();
          push_global(module + "." + cls);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          auto cls = pop(), module = pop();
          if (module->kind != Kind::kString || cls->kind != Kind::kString) fail("names a class with a non-string");
          push_global(module->s + "." + cls->s);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          const size_t count = op - 0x84;
          if (stack_.size() - floor() < count) fail("builds a tuple from fewer values than its stack holds");
          auto t = make_value(Kind::kTuple);
          t->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(count), stack_.end());
          stack_.resize(stack_.size() - count);
          push(t);
          break;
        }
        case 't': {
          auto t = make_value(Kind::kTuple);
          t->items = pop_mark();
          push(t);
          break;
        }
        case 'l': {
          auto t = make_value(Kind::kList);
          t->items = pop_mark();
          push(t);
          break;
        }
        case 'd': {
          auto items = pop_mark();
          push(make_value(Kind::kDict));
          set_items(stack_.back(), items);
          break;
        }
        case 'a': {
          auto v = pop();
          append(top(), {v});
          break;
        }
        case 'e': {
          auto items = pop_mark();
          append(top(), items);
          break;
        }
        case 's': {
          auto v = pop(), k = pop();
          set_items(top(), {k, v});
          break;
        }
        case 'u': {
          auto items = pop_mark();
          set_items(top(), items);
          break;
        }
        case 'R':
        case 0x81: {  // REDUCE, NEWOBJ
          auto args = pop(), callable = pop();
          push(call(callable, args));
          break;
        }
        case 'b':
          pop();
          top();
          break;  // BUILD: an object's state; Volt keeps the object as it is
        case 'Q':
          push(persistent(pop()));
          break;
        case '0':
          pop();
          break;
        case '1':
          pop_mark();
          break;
        case '2':
          push(top());
          break;
        default: {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "0x%02x", op);
          fail(std::string("uses opcode ") + hex + ", which a weights-only reader does not read");
        }
      }
    }
    fail("ends without STOP");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw CheckpointError(name_ + " is damaged or not a checkpoint: its data.pkl " + why + " (at byte " +
                          std::to_string(at_) + ").");
  }
  const unsigned char* take(size_t k) {
    if (k > n_ - i_) fail("ends inside an opcode");
    const unsigned char* b = p_ + i_;
    i_ += k;
    return b;
  }
  static uint64_t le(const unsigned char* b, size_t k) {
    uint64_t v = 0;
    for (size_t j = k; j-- > 0;) v = (v << 8) | b[j];
    return v;
  }
  std::string line() {
    const size_t start = i_;
    while (i_ < n_ && p_[i_] != '\n') ++i_;
    if (i_ >= n_) fail("ends inside a GLOBAL");
    return std::string(reinterpret_cast<const char*>(p_ + start), i_++ - start);
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(PyValuePtr v) {
    if (stack_.size() > (size_t{1} << 24)) fail("grows its stack beyond 16 million values");
    stack_.push_back(std::move(v));
  }
  void push_int(int64_t x) {
    auto v = make_value(Kind::kInt);
    v->i = x;
    push(v);
  }
  void push_text(Kind k, uint64_t len) {
    if (len > n_ - i_) fail("declares " + std::to_string(len) + " bytes but " + std::to_string(n_ - i_) + " follow");
    auto v = make_value(k);
    v->s.assign(reinterpret_cast<const char*>(take(static_cast<size_t>(len))), static_cast<size_t>(len));
    push(v);
  }
  PyValuePtr pop() {
    if (stack_.size() <= floor()) fail("pops more than its stack holds");
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  PyValuePtr& top() {
    if (stack_.size() <= floor()) fail("uses a value its stack does not hold");
    return stack_.back();
  }
  std::vector<PyValuePtr> pop_mark() {
    if (marks_.empty()) fail("pops to a MARK that was never set");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<PyValuePtr> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  void memo_put(uint64_t index) {
    if (index > n_) fail("names memo slot " + std::to_string(index));
    memo_[index] = top();
  }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("reads memo slot " + std::to_string(index) + ", which was never set");
    push(it->second);
  }
  void push_global(const std::string& qualified) {
    auto v = make_value(Kind::kObject);
    v->s = qualified;
    v->b = true;  // a class or function itself, not yet called
    push(v);
  }
  void append(const PyValuePtr& target, const std::vector<PyValuePtr>& values) {
    if (target->kind != Kind::kList && target->kind != Kind::kObject) fail("appends to " + kind_name(*target));
    target->items.insert(target->items.end(), values.begin(), values.end());
  }
  void set_items(const PyValuePtr& target, const std::vector<PyValuePtr>& kv) {
    if (target->kind != Kind::kDict && target->kind != Kind::kObject) fail("sets items of " + kind_name(*target));
    if (kv.size() % 2 != 0) fail("sets items from an odd number of values");
    for (size_t k = 0; k < kv.size(); k += 2) {
      bool replaced = false;
      if (kv[k]->kind == Kind::kString) {
        for (auto& [key, value] : target->dict) {
          if (key->kind == Kind::kString && key->s == kv[k]->s) {
            value = kv[k + 1];
            replaced = true;
          }
        }
      }
      if (!replaced) target->dict.emplace_back(kv[k], kv[k + 1]);
    }
  }
  int64_t int_arg(const PyValuePtr& v, const char* what) {
    if (v->kind != Kind::kInt) fail(std::string("gives ") + what + " as " + kind_name(*v));
    return v->i;
  }
  std::vector<int64_t> int_tuple(const PyValuePtr& v, const char* what) {
    if (v->kind != Kind::kTuple && v->kind != Kind::kList) fail(std::string("gives ") + what + " as " + kind_name(*v));
    std::vector<int64_t> out;
    for (const auto& x : v->items) out.push_back(int_arg(x, what));
    return out;
  }
  PyValuePtr persistent(const PyValuePtr& id) {
    // ('storage', storage class, key, location, numel)
    if (id->kind != Kind::kTuple || id->items.size() != 5 || id->items[0]->kind != Kind::kString ||
        id->items[0]->s != "storage" || id->items[1]->kind != Kind::kObject || id->items[2]->kind != Kind::kString) {
      fail("has a persistent id that is not a storage");
    }
    const at::ScalarType dtype = storage_dtype(id->items[1]->s);
    if (dtype == at::ScalarType::Undefined) fail("has a storage of class " + printable(id->items[1]->s));
    const int64_t numel = int_arg(id->items[4], "a storage's size");
    const std::string& key = id->items[2]->s;
    const StorageBytes record = storage_(key);
    const unsigned char* bytes = record.data;
    const size_t size = record.size;
    const size_t item = c10::elementSize(dtype);
    if (numel < 0 || static_cast<uint64_t>(numel) > size / item) {
      fail("declares a storage of " + std::to_string(numel) + " elements of " + std::to_string(item) +
           " bytes in record data/" + printable(key) + ", which holds " + std::to_string(size) + " bytes");
    }
    auto it = storages_.find(key);
    if (it != storages_.end()) return it->second;
    auto v = make_value(Kind::kTensor);
    if (record.owner && numel > 0 && reinterpret_cast<uintptr_t>(bytes) % 64 == 0) {
      // Into the (private, copy-on-write) mapping: the bytes were just read by the CRC check, not copied again.
      auto* keep = new std::shared_ptr<const void>(record.owner);
      v->tensor = at::from_blob(
          const_cast<unsigned char*>(bytes), {numel}, [keep](void*) { delete keep; }, at::TensorOptions().dtype(dtype));
    } else {
      v->tensor = at::empty({numel}, at::TensorOptions().dtype(dtype));
      if (numel > 0) std::memcpy(v->tensor.data_ptr(), bytes, static_cast<size_t>(numel) * item);
    }
    storages_[key] = v;
    return v;
  }
  PyValuePtr rebuild_tensor(const std::vector<PyValuePtr>& a) {
    if (a.size() < 4 || a[0]->kind != Kind::kTensor) fail("rebuilds a tensor without a storage");
    const at::Tensor& storage = a[0]->tensor;
    const int64_t offset = int_arg(a[1], "a tensor's offset");
    const auto size = int_tuple(a[2], "a tensor's size");
    const auto stride = int_tuple(a[3], "a tensor's stride");
    if (size.size() != stride.size())
      fail("gives a tensor " + std::to_string(size.size()) + " sizes and " + std::to_string(stride.size()) +
           " strides");
    // Every element must lie inside the storage.
    int64_t last = offset;
    bool empty = false;
    bool ok = offset >= 0;
    for (size_t d = 0; d < size.size() && ok; ++d) {
      if (size[d] < 0 || stride[d] < 0) ok = false;
      if (size[d] == 0) empty = true;
      int64_t reach = 0;
      if (ok && size[d] > 0 &&
          (__builtin_mul_overflow(size[d] - 1, stride[d], &reach) || __builtin_add_overflow(last, reach, &last))) {
        ok = false;
      }
    }
    if (!ok || (!empty && last >= storage.numel())) {
      fail("has a tensor whose shape, strides and offset reach past its storage of " + std::to_string(storage.numel()) +
           " elements");
    }
    auto v = make_value(Kind::kTensor);
    v->tensor = storage.as_strided(size, stride, offset);
    return v;
  }
  PyValuePtr call(const PyValuePtr& callable, const PyValuePtr& args) {
    if (args->kind != Kind::kTuple) fail("calls " + kind_name(*callable) + " with " + kind_name(*args));
    const std::string fn = callable->kind == Kind::kObject ? callable->s : "";
    if (fn == "collections.OrderedDict" || fn == "builtins.dict") {
      if (!args->items.empty()) fail("builds a dict from arguments");
      auto d = make_value(Kind::kDict);
      d->b = fn == "collections.OrderedDict";
      return d;
    }
    if (fn == "torch._utils._rebuild_tensor_v2" || fn == "torch._utils._rebuild_tensor")
      return rebuild_tensor(args->items);
    if (fn == "torch._utils._rebuild_parameter" || fn == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || args->items[0]->kind != Kind::kTensor) fail("rebuilds a parameter without a tensor");
      return args->items[0];
    }
    // LibTorch's pickler tags typed containers and wraps lists: the value is the first argument.
    if (fn.rfind("torch.jit._pickle.", 0) == 0 && !args->items.empty()) return args->items[0];
    // Anything else is kept by name, never run.
    auto v = make_value(Kind::kObject);
    v->s = fn.empty() ? "<call of " + kind_name(*callable) + ">" : fn;
    v->items = args->items;
    return v;
  }

  const unsigned char* p_;
  size_t n_;
  size_t i_ = 0, at_ = 0;
  const StorageLoader& storage_;
  const std::string& name_;
  std::vector<PyValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, PyValuePtr> memo_;
  std::map<std::string, PyValuePtr> storages_;
};

}  // namespace

PyValuePtr read_python_pickle(const unsigned char* bytes, size_t size, const StorageLoader& storage,
                              const std::string& name) {
  return Reader(bytes, size, storage, name).run();
}

std::map<std::string, at::Tensor> tensor_dict(const PyValue& v, const std::string& name, const std::string& where) {
  if (v.kind != PyValue::Kind::kDict)
    throw CheckpointError(name + " has " + where + " that is " + kind_name(v) + ", not a dict.");
  std::map<std::string, at::Tensor> out;
  for (const auto& [k, value] : v.dict) {
    if (k->kind != PyValue::Kind::kString) {
      throw CheckpointError(name + " has a name in " + where + " that is " + kind_name(*k) + ", not a string.");
    }
    if (value->kind != PyValue::Kind::kTensor) {
      throw CheckpointError(name + " has " + where + " entry " + quote_path(k->s) + " that is " + kind_name(*value) +
                            ", not a tensor.");
    }
    out[k->s] = value->tensor;
  }
  return out;
}

}  // namespace volt::checkpoint_io::detail
