#pragma once
#include <stdexcept>
#include <string>

namespace volt {

/// Base of every error Volt throws. Messages say what was wrong, what was given
/// and how to fix it.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// A flag, option or combination of them is invalid. Thrown before any work starts.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// The request is valid in general but this build, machine or plug-in cannot do it.
class NotSupportedError : public Error {
 public:
  using Error::Error;
};

/// A collective, rendezvous or remote rank failed.
class DistributedError : public Error {
 public:
  using Error::Error;
};

/// A checkpoint could not be written, read or understood.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

/// A data file or data set is missing, truncated or malformed.
class DataError : public Error {
 public:
  using Error::Error;
};

}  // namespace volt
