// TorchCheckpointIO::load_checkpoint: the .ckpt reader behind resume (ckpt_path) and validate/test
// with a checkpoint; and read_weights_file, the weights-only reader behind load_weights and `volt inspect`. A file it
// accepts must give a Checkpoint whose parts can be read the way inspect and resume read them (tensors defined,
// metadata a JSON object). Input: the file's bytes; or a NUL byte and then a pickle, which the harness packs into an
// archive as Volt writes it (data.pkl and the tensor records data/0 .. data/7, 256 bytes each) with valid checksums, so
// that mutations reach the unpickler and Volt's reading of the dict instead of failing a zip CRC.
//
// LibTorch 1.13's unpickler trusts what a pickle claims (lengths, memo indices, stack depth); load_checkpoint
// walks the pickle first, and regressions/checkpoint/ holds the inputs that showed each claim. Some make an
// unchecked LibTorch allocate gigabytes: the main build replays them under an address-space limit.
#include <cstring>
#include <set>
#include <string>
#include <tuple>

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <caffe2/serialize/inline_container.h>

#include "fuzz_target.h"
#include "volt/checkpoint_io/torch_checkpoint_io.h"
#include "volt/checkpoint_io/weights_file.h"
#include "volt/core/error.h"

namespace {

constexpr const char* kTarget = "checkpoint";

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
    const std::string file = archive_around(data + 1, size - 1);
    volt::fuzz::write_file(path, reinterpret_cast<const uint8_t*>(file.data()), file.size());
  } else {
    volt::fuzz::write_file(path, data, size);
  }
  // The weights-only reader behind load_weights and volt inspect (it runs its own pickle reader): it refuses
  // the file or gives tensors that lie inside their storages, and JSON that can be printed.
  try {
    const auto weights = volt::checkpoint_io::read_weights_file(path);
    for (const auto& [name, t] : weights.state_dict) {
      if (!t.defined()) volt::fuzz::crash(kTarget, "read_weights_file gave tensor '" + name + "' undefined");
      if (t.numel() > 0 && at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.element_size(),
                                                            t.storage_offset()) > t.storage().nbytes()) {
        volt::fuzz::crash(kTarget, "read_weights_file gave tensor '" + name + "', which reaches past its storage");
      }
      if (t.numel() > 0) (void)t.contiguous().sum();
    }
    (void)weights.info.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const volt::Error&) {
  } catch (const std::exception& e) {
    volt::fuzz::crash_on_exception(kTarget, e);
  }
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
