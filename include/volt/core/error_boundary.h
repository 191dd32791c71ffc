#pragma once
#include <exception>
#include <string>

#include "volt/core/error.h"

namespace volt {

/// Which volt::Error kind a foreign exception becomes at a public entry point.
enum class ErrorKind { kError, kConfig, kCheckpoint, kData, kDistributed };

/// Turns any exception into a volt::Error at a public entry point (a Trainer stage,
/// CheckpointIO, a DataModule). A volt::Error passes unchanged. A LibTorch error
/// (c10::Error), a standard exception or anything else becomes `kind`, with the message
/// "<where>: <what went wrong>. <how to fix it>": LibTorch's first line without its
/// backtrace (an internal-assertion text is replaced by a sentence saying so), and a hint
/// for the cases seen in practice (a label outside the classes, an invalid optimizer or
/// module hyperparameter, mismatched shapes, out of memory). With VOLT_DEBUG=1 in the
/// environment the original report, backtrace included, is appended.
std::exception_ptr to_volt_error(std::exception_ptr error, const std::string& where, ErrorKind kind = ErrorKind::kError);

/// Rethrows the exception being handled as to_volt_error does. Call it in a catch block.
[[noreturn]] void rethrow_as_volt_error(const std::string& where, ErrorKind kind = ErrorKind::kError);

/// True when VOLT_DEBUG is set to something other than "" or "0".
bool volt_debug();

}  // namespace volt
