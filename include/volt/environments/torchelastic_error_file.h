#pragma once
#include <exception>
#include <string>

#include "volt/core/environ.h"

namespace volt::environments {

/// The error-file JSON of torch.distributed.elastic (what its ErrorHandler writes for a
/// Python worker): {"message": {"message": "<Kind>: <what>", "extraInfo": {"py_callstack":
/// <text torchrun prints as the traceback>, "timestamp": "<seconds since the epoch>"}}}.
/// `kind` is e.g. "ConfigError"; `context` a line saying where it was raised.
std::string torchelastic_error_json(const std::string& kind, const std::string& what, const std::string& context,
                                    long long timestamp);

/// The volt::Error kind of `e` ("ConfigError", "DistributedError", ..., "Error"), or
/// "std::exception" for anything else.
std::string error_kind(const std::exception& e);

/// When torchrun started this process (TORCHELASTIC_ERROR_FILE is set), writes `e` there
/// in torch.distributed.elastic's format, so that torchrun's failure summary names this
/// error as the root cause instead of `error_file: <N/A>`. Atomic (a temporary file beside
/// it, fsync, rename): torchrun never reads half a file. `context` says where the error was
/// raised ("Trainer.fit on global rank 1"). Returns whether a file was written; never
/// throws (a write that fails is reported once on stderr). Called by the Trainer when a
/// stage fails, on the rank that fails.
bool record_torchelastic_error(const std::exception& e, const std::string& context,
                               const Environ& env = Environ::current());

}  // namespace volt::environments
