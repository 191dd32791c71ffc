// TorchCheckpointIO::load_checkpoint: the .ckpt reader behind resume (ckpt_path), validate/test
// with a checkpoint, and `volt inspect`. A file it accepts must give a Checkpoint whose parts can be
// read the way inspect and resume read them (tensors defined, metadata a JSON object).
// Input: the file's bytes; or a NUL byte and then a pickle, which the harness packs into an archive as
// Volt writes it (data.pkl and the tensor records data/0 .. data/7, 256 bytes each) with valid checksums,
// so that mutations reach the unpickler and Volt's reading of the dict instead of failing a zip CRC.
//
// Known and reported (not a Volt bug): LibTorch 1.13's Unpickler sizes a string to the length its
// opcode declares before reading it, and its memo table to the largest index a BINPUT names, so a 2 KB
// file whose pickle claims a 4 GB string (or memo slot 400 million) makes load_checkpoint allocate and
// fill gigabytes, then fail with CheckpointError (or be killed for memory). Under libFuzzer that is an
// out-of-memory stop on every such mutation; the libFuzzer build skips inputs whose pickle claims more
// than the pickle itself could hold (pickle_claims_too_much). The replay in the main build runs
// them, under an address-space limit (tests/fuzz/regressions/checkpoint/, replay.cmake).
#include <cstring>
#include <set>
#include <string>
#include <tuple>

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <caffe2/serialize/inline_container.h>

#include "fuzz_target.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/core/error.h"

namespace {

constexpr const char* kTarget = "checkpoint";

uint64_t little_endian(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Walks the opcodes of a pickle (protocol 2-4, what torch.save and Volt write) and says whether it may claim
// what LibTorch 1.13's unpickler allocates without a second thought: a length field declaring more bytes
// than follow it, or a memo index beyond the pickle's size. An opcode the walk does not know (LibTorch knows
// a few more, and reads on from there, e.g. through a string whose length was mutated) counts as yes: the
// walk cannot vouch for the rest. So does NEWOBJ, which LibTorch 1.13 runs on an empty stack (a SIGSEGV, in
// tests/fuzz/open/). STOP ends the walk with no.
bool pickle_claims_too_much(const uint8_t* p, size_t n) {
  size_t i = 0;
  auto skip = [&](uint64_t bytes) {
    if (bytes > n - i) return false;
    i += bytes;
    return true;
  };
  while (i < n) {
    const uint8_t op = p[i++];
    int length_bytes = 0;  // the opcode is followed by a little-endian length of this many bytes, then the data
    uint64_t fixed = 0;    // or by this many bytes of argument
    switch (op) {
      case 'X': case 'T': case 'B': case 0x8b: length_bytes = 4; break;
      case 0x8d: case 0x8e: length_bytes = 8; break;
      case 0x8c: case 'U': case 'C': case 0x8a: length_bytes = 1; break;
      case 0x80: case 'K': fixed = 1; break;
      case 'M': fixed = 2; break;
      case 'J': fixed = 4; break;
      case 'h': fixed = 1; break;
      case 'j': fixed = 4; break;
      case 'q': case 'r': {  // BINPUT, LONG_BINPUT: the unpickler sizes its memo table to the index
        const int bytes = op == 'q' ? 1 : 4;
        if (static_cast<size_t>(bytes) > n - i) return false;
        if (little_endian(p + i, bytes) > n) return true;
        i += bytes;
        continue;
      }
      case 'G': case 0x95: fixed = 8; break;
      case 'c':  // GLOBAL: module and name, each ending in a newline
        for (int lines = 0; lines < 2 && i < n; ++i) lines += p[i] == '\n';
        continue;
      case '}': case ']': case ')': case '(': case 'u': case 's': case 'e': case 'a': case 't': case 0x85:
      case 0x86: case 0x87: case 0x88: case 0x89: case 'N': case 'R': case 'b': case '0': case '2': case 'Q':
      case 0x94: case 0x8f: case 0x90: case 0x91: case 0x93:  // not NEWOBJ (0x81): tests/fuzz/open/README.md
        continue;
      default:
        return op != '.';
    }
    if (length_bytes > 0) {
      if (static_cast<size_t>(length_bytes) > n - i) return false;
      const uint64_t length = little_endian(p + i, length_bytes);
      i += length_bytes;
      if (length > n - i) return true;
      i += length;
    } else if (!skip(fixed)) {
      return false;
    }
  }
  return false;
}

[[maybe_unused]] bool declares_oversized_string(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    if (!reader.hasRecord("data.pkl")) return false;
    auto [bytes, size] = reader.getRecord("data.pkl");
    return pickle_claims_too_much(static_cast<const uint8_t*>(bytes.get()), size);
  } catch (const std::exception&) {
    return false;  // load_checkpoint sees the same damage and must report it
  }
}

std::string archive_around(const uint8_t* pickle, size_t size) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) -> size_t {
    out.append(static_cast<const char*>(bytes), n);
    return n;
  });
  writer.writeRecord("data.pkl", pickle, size);
  const std::string tensor(256, '\x01');
  for (int i = 0; i < 8; ++i) writer.writeRecord("data/" + std::to_string(i), tensor.data(), tensor.size());
  writer.writeEndOfFile();
  return out;
}

}  // namespace

VOLT_FUZZ_TARGET(checkpoint) {
  const std::string path = volt::fuzz::scratch_path("input.ckpt");
  if (size > 0 && data[0] == 0) {
#ifdef VOLT_FUZZ_LIBFUZZER
    if (pickle_claims_too_much(data + 1, size - 1)) return 0;
#endif
    const std::string file = archive_around(data + 1, size - 1);
    volt::fuzz::write_file(path, reinterpret_cast<const uint8_t*>(file.data()), file.size());
  } else {
    volt::fuzz::write_file(path, data, size);
  }
#ifdef VOLT_FUZZ_LIBFUZZER
  if (declares_oversized_string(path)) return 0;
#endif
  volt::Checkpoint ckpt;
  try {
    ckpt = volt::checkpoint_io::TorchCheckpointIO().load_checkpoint(path);
  } catch (const volt::Error&) {
    return 0;
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kTarget, e);
  }
  // What the archive's tensor records hold: accepted storages must be backed by them.
  uint64_t record_bytes = 0;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const auto& name : reader.getAllRecords()) {
      if (name.rfind("data/", 0) == 0) record_bytes += std::get<1>(reader.getRecord(name));
    }
  } catch (const std::exception& e) {
    volt::fuzz::crash(kTarget, std::string("an accepted checkpoint's archive cannot be read again: ") + e.what());
  }
  std::set<const void*> storages;
  uint64_t storage_bytes = 0;
  for (const auto* group : {&ckpt.tensors}) {
    for (const auto& [name, t] : *group) {
      if (t.defined() && t.numel() > 0 &&
          at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.element_size(), t.storage_offset()) >
              t.storage().nbytes()) {
        volt::fuzz::crash(kTarget, "accepted tensor '" + name + "', which reaches past its storage");
      }
      if (t.defined() && storages.insert(t.storage().data()).second) storage_bytes += t.storage().nbytes();
    }
  }
  uint64_t blob_bytes = 0;
  for (const auto& [name, blob] : ckpt.blobs) blob_bytes += blob.size();
  if (storage_bytes + blob_bytes > record_bytes) {
    volt::fuzz::crash(kTarget, "accepted tensors and blobs of " + std::to_string(storage_bytes + blob_bytes) +
                                   " bytes from tensor records of " + std::to_string(record_bytes) + " bytes");
  }
  try {
    int64_t bytes = 0;
    for (const auto& [name, t] : ckpt.tensors) {
      if (!t.defined()) volt::fuzz::crash(kTarget, "tensor '" + name + "' was accepted undefined");
      bytes += t.numel() * static_cast<int64_t>(t.element_size());
      (void)t.sizes().vec();
      // Resume copies every byte into a parameter: read them all, as that copy would.
      if (t.layout() == at::kStrided && t.device().is_cpu() && t.numel() > 0) {
        const at::Tensor c = t.contiguous();
        const auto* p = static_cast<const unsigned char*>(c.data_ptr());
        unsigned sum = 0;
        for (size_t k = 0; k < c.nbytes(); ++k) sum += p[k];
        volatile unsigned sink = sum;
        (void)sink;
      }
    }
    for (const auto& [name, blob] : ckpt.blobs) bytes += static_cast<int64_t>(blob.size());
    (void)ckpt.state_dict();
    if (!ckpt.meta.is_object() && !ckpt.meta.is_null()) {
      volt::fuzz::crash(kTarget, "accepted metadata that is a JSON " + std::string(ckpt.meta.type_name()) +
                                     ", which inspect and resume cannot read");
    }
    (void)ckpt.meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    (void)bytes;
  } catch (const std::exception& e) {
    volt::fuzz::crash(kTarget, std::string("an accepted checkpoint cannot be read: ") + e.what());
  }
  return 0;
}
