#include "checkpoint_io/detail/pickle_writer.h"

#include <cstring>

#include "volt/core/error.h"

namespace volt::checkpoint_io::detail {

std::string storage_class(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "torch.FloatStorage";
    case at::kDouble:
      return "torch.DoubleStorage";
    case at::kHalf:
      return "torch.HalfStorage";
    case at::kBFloat16:
      return "torch.BFloat16Storage";
    case at::kLong:
      return "torch.LongStorage";
    case at::kInt:
      return "torch.IntStorage";
    case at::kShort:
      return "torch.ShortStorage";
    case at::kChar:
      return "torch.CharStorage";
    case at::kByte:
      return "torch.ByteStorage";
    case at::kBool:
      return "torch.BoolStorage";
    case at::kComplexFloat:
      return "torch.ComplexFloatStorage";
    case at::kComplexDouble:
      return "torch.ComplexDoubleStorage";
    default:
      return "";
  }
}

namespace {

using Kind = PyValue::Kind;

class Writer {
 public:
  explicit Writer(std::vector<at::Tensor>& storages) : storages_(storages) {}

  std::string run(const PyValue& root) {
    out_ += "\x80\x02";  // PROTO 2, what torch.save writes
    value(root, 0);
    out_ += '.';
    return std::move(out_);
  }

 private:
  void value(const PyValue& v, int depth) {
    if (depth > 64) throw CheckpointError("cannot write a checkpoint that nests its values more than 64 levels deep.");
    switch (v.kind) {
      case Kind::kNone:
        out_ += 'N';
        return;
      case Kind::kBool:
        out_ += v.b ? '\x88' : '\x89';
        return;
      case Kind::kInt:
        integer(v.i);
        return;
      case Kind::kFloat: {
        // BINFLOAT: a big-endian IEEE double, so every value comes back bit for bit.
        uint64_t bits = 0;
        std::memcpy(&bits, &v.f, 8);
        out_ += 'G';
        for (int b = 7; b >= 0; --b) out_ += static_cast<char>((bits >> (8 * b)) & 0xff);
        return;
      }
      case Kind::kString:
        text(v.s);
        return;
      case Kind::kBytes:
        throw CheckpointError(
            "cannot write bytes into a checkpoint's pickle (PyTorch's weights-only reader refuses "
            "them); store them as a uint8 tensor.");
      case Kind::kList:
        out_ += ']';
        if (!v.items.empty()) {
          out_ += '(';
          for (const auto& item : v.items) value(*item, depth + 1);
          out_ += 'e';  // APPENDS
        }
        return;
      case Kind::kTuple:
        if (v.items.empty()) {
          out_ += ')';
          return;
        }
        if (v.items.size() <= 3) {
          for (const auto& item : v.items) value(*item, depth + 1);
          out_ += static_cast<char>(0x84 + v.items.size());  // TUPLE1..3
          return;
        }
        out_ += '(';
        for (const auto& item : v.items) value(*item, depth + 1);
        out_ += 't';
        return;
      case Kind::kDict:
        if (v.b) {
          ordered_dict();
        } else {
          out_ += '}';
        }
        if (!v.dict.empty()) {
          out_ += '(';
          for (const auto& [key, item] : v.dict) {
            value(*key, depth + 1);
            value(*item, depth + 1);
          }
          out_ += 'u';  // SETITEMS
        }
        return;
      case Kind::kTensor:
        tensor(v.tensor);
        return;
      case Kind::kObject:
        throw CheckpointError("cannot write an object of class " + v.s +
                              " into a checkpoint: only dicts, lists, strings, numbers and tensors are written.");
    }
  }

  void global(const char* module, const char* name) {
    out_ += 'c';
    out_ += module;
    out_ += '\n';
    out_ += name;
    out_ += '\n';
  }
  void ordered_dict() {
    global("collections", "OrderedDict");
    out_ += ")R";  // OrderedDict()
  }
  void le(uint64_t v, int bytes) {
    for (int b = 0; b < bytes; ++b) out_ += static_cast<char>((v >> (8 * b)) & 0xff);
  }
  void integer(int64_t x) {
    if (x >= 0 && x < 256) {
      out_ += 'K';
      le(static_cast<uint64_t>(x), 1);
    } else if (x >= 0 && x < 65536) {
      out_ += 'M';
      le(static_cast<uint64_t>(x), 2);
    } else if (x >= INT32_MIN && x <= INT32_MAX) {
      out_ += 'J';
      le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(x))), 4);
    } else {
      // LONG1: the fewest little-endian two's-complement bytes that keep the sign.
      std::string bytes;
      int64_t rest = x;
      for (;;) {
        bytes += static_cast<char>(rest & 0xff);
        const bool sign = (rest & 0x80) != 0;
        rest >>= 8;  // arithmetic shift
        if ((rest == 0 && !sign) || (rest == -1 && sign)) break;
      }
      out_ += '\x8a';
      out_ += static_cast<char>(bytes.size());
      out_ += bytes;
    }
  }
  void text(const std::string& s) {
    out_ += 'X';  // BINUNICODE
    le(s.size(), 4);
    out_ += s;
  }
  void tensor(const at::Tensor& t) {
    if (!t.defined()) {
      out_ += 'N';
      return;
    }
    if (t.layout() != at::kStrided)
      throw CheckpointError("cannot write a " + std::string(c10::toString(t.layout())) + " tensor into a checkpoint.");
    const std::string cls = storage_class(t.scalar_type());
    if (cls.empty()) {
      throw CheckpointError(std::string("cannot write a tensor of dtype ") + c10::toString(t.scalar_type()) +
                            " into a checkpoint: torch.save has no storage class for it.");
    }
    at::Tensor c = t.detach();
    if (!c.device().is_cpu()) c = c.to(at::kCPU);
    c = c.contiguous();
    // A storage of its own holding exactly the tensor's elements: a view's base is not written.
    if (c.storage_offset() != 0 || c.storage().nbytes() != static_cast<size_t>(c.numel()) * c.element_size()) {
      c = c.clone(at::MemoryFormat::Contiguous);
    }
    const std::string key = std::to_string(storages_.size());
    storages_.push_back(c);
    global("torch._utils", "_rebuild_tensor_v2");
    out_ += '(';
    // persistent id ('storage', torch.<T>Storage, key, 'cpu', numel)
    out_ += '(';
    text("storage");
    const auto dot = cls.find('.');
    global(cls.substr(0, dot).c_str(), cls.substr(dot + 1).c_str());
    text(key);
    text("cpu");
    integer(c.numel());
    out_ += 't';
    out_ += 'Q';  // BINPERSID
    integer(0);   // storage offset
    auto int_tuple = [&](c10::IntArrayRef values) {
      PyValue tuple;
      tuple.kind = Kind::kTuple;
      for (const int64_t x : values) {
        auto item = std::make_shared<PyValue>();
        item->kind = Kind::kInt;
        item->i = x;
        tuple.items.push_back(item);
      }
      value(tuple, 0);
    };
    int_tuple(c.sizes());
    int_tuple(c.strides());
    out_ += '\x89';  // requires_grad False
    ordered_dict();  // backward hooks
    out_ += "tR";
  }

  std::vector<at::Tensor>& storages_;
  std::string out_;
};

}  // namespace

std::string write_pickle(const PyValue& root, std::vector<at::Tensor>& storages) {
  return Writer(storages).run(root);
}

}  // namespace volt::checkpoint_io::detail
