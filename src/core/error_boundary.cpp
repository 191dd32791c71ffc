#include "volt/core/error_boundary.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <new>
#include <utility>

#include "volt/core/out_of_memory_error.h"

namespace volt {
namespace {

std::string first_line(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find('\n', begin);
  std::string line = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  while (!line.empty() && (line.back() == '.' || line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

bool has(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

/// How to fix what LibTorch reported, for the failures users meet (empty: no specific hint).
std::string hint_for(const std::string& message) {
  if (has(message, "out of bounds") && has(message, "Target")) {
    return "A label is outside the model's classes: labels must be 0 .. C-1 for a model with C outputs. Check "
           "the data's labels, or give the model as many outputs as there are classes.";
  }
  if (has(message, "Invalid learning rate") || has(message, "learning rate")) {
    return "The optimizer refused its learning rate: give a finite, positive learning rate (e.g. --model.lr 0.001).";
  }
  if (has(message, "Invalid") && (has(message, "momentum") || has(message, "weight_decay") ||
                                  has(message, "beta") || has(message, "epsilon") || has(message, "eps"))) {
    return "The optimizer refused one of its hyperparameters: give a value in its valid range.";
  }
  if (has(message, "dropout probability")) {
    return "Dropout must be a probability: give a value in [0, 1).";
  }
  if (has(message, "shapes cannot be multiplied") || has(message, "size mismatch") ||
      has(message, "must match the size") || has(message, "Expected input batch_size") ||
      has(message, "Expected 3D") || has(message, "Expected 4D") || has(message, "expected input")) {
    return "The batch's shape does not fit the model: check the data's shape against the model's input size.";
  }
  if (has(message, "loaded state dict") || has(message, "parameter group")) {
    return "The optimizer state in the checkpoint does not fit this optimizer (another optimizer, or another "
           "model): resume with the configuration that wrote it, or load only the weights.";
  }
  if (has(message, "DefaultCPUAllocator") || has(message, "not enough memory") || has(message, "out of memory")) {
    return "The process ran out of memory: use a smaller batch_size or model.";
  }
  return "";
}

template <typename E>
std::exception_ptr make(const std::string& message) {
  return std::make_exception_ptr(E(message));
}

std::exception_ptr make_kind(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::kConfig: return make<ConfigError>(message);
    case ErrorKind::kCheckpoint: return make<CheckpointError>(message);
    case ErrorKind::kData: return make<DataError>(message);
    case ErrorKind::kDistributed: return make<DistributedError>(message);
    case ErrorKind::kError: break;
  }
  return make<Error>(message);
}

}  // namespace

bool volt_debug() {
  const char* v = std::getenv("VOLT_DEBUG");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

std::exception_ptr to_volt_error(std::exception_ptr error, const std::string& where, ErrorKind kind) {
  if (!error) return error;
  std::string said;   // the first line of the foreign message
  std::string full;   // the whole report, for VOLT_DEBUG=1
  std::string source = "LibTorch";
  bool out_of_memory = false;
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    return error;
  } catch (const c10::Error& e) {
    said = first_line(e.what_without_backtrace());
    full = e.what();
    out_of_memory = dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr ||
                    std::string(e.what_without_backtrace()).rfind("CUDA out of memory", 0) == 0;
  } catch (const std::bad_alloc&) {
    said = "out of memory (std::bad_alloc)";
    source = "the C++ runtime";
  } catch (const std::exception& e) {
    said = first_line(e.what());
    full = e.what();
    source = "the C++ runtime";
  } catch (...) {
    said = "an exception that is not a std::exception";
    source = "user code";
  }
  std::string message;
  if (has(said, "INTERNAL ASSERT") || (has(said, "Expected") && has(said, "to be true, but got false"))) {
    message = where + ": LibTorch failed one of its own consistency checks (an input it cannot handle, or a bug "
              "in LibTorch).";
  } else {
    message = where + ": " + (said.empty() ? "an error without a message" : said) + " (reported by " + source + ").";
  }
  const std::string hint = hint_for(said);
  message += " " + (hint.empty() ? std::string("Check the inputs and settings that reach this step.") : hint);
  if (!volt_debug()) {
    message += " Set VOLT_DEBUG=1 for the full report.";
  } else if (!full.empty()) {
    message += "\n" + source + "'s full report:\n" + full;
  }
  // Out of memory keeps its kind whatever the stage: the batch-size finder counts on it.
  if (out_of_memory) return make<OutOfMemoryError>(message);
  return make_kind(kind, message);
}

void rethrow_as_volt_error(const std::string& where, ErrorKind kind) {
  std::rethrow_exception(to_volt_error(std::current_exception(), where, kind));
}

}  // namespace volt
