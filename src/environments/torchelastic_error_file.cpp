#include "volt/environments/torchelastic_error_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>

#include <nlohmann/json.hpp>

#include "volt/core/error.h"

namespace volt::environments {

std::string torchelastic_error_json(const std::string& kind, const std::string& what, const std::string& context,
                                    long long timestamp) {
  // torchrun prints py_callstack (else message) under "traceback": a C++ program has no
  // Python stack, so it carries the error itself and where it was raised.
  const std::string callstack = kind + ": " + what + "\n(" + context + "; a C++ program: no Python call stack)";
  const nlohmann::json j = {{"message",
                             {{"message", kind + ": " + what},
                              {"extraInfo", {{"py_callstack", callstack}, {"timestamp", std::to_string(timestamp)}}}}}};
  // Invalid UTF-8 in a message (a file name, say) is replaced, never a second error.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string error_kind(const std::exception& e) {
  if (dynamic_cast<const ConfigError*>(&e)) return "ConfigError";
  if (dynamic_cast<const NotSupportedError*>(&e)) return "NotSupportedError";
  if (dynamic_cast<const DistributedError*>(&e)) return "DistributedError";
  if (dynamic_cast<const CheckpointError*>(&e)) return "CheckpointError";
  if (dynamic_cast<const DataError*>(&e)) return "DataError";
  if (dynamic_cast<const Error*>(&e)) return "Error";
  return "std::exception";
}

namespace {

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool record_torchelastic_error(const std::exception& e, const std::string& context, const Environ& env) {
  const auto path = env.get("TORCHELASTIC_ERROR_FILE");
  if (!path || path->empty()) return false;
  const std::string text = torchelastic_error_json(error_kind(e), e.what(), context, std::time(nullptr)) + "\n";
  const std::string tmp = *path + ".tmp." + std::to_string(::getpid());
  std::string failed;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    failed = "cannot create " + tmp + ": " + std::strerror(errno);
  } else {
    const bool ok = write_all(fd, text) && ::fsync(fd) == 0;
    const int saved = errno;
    ::close(fd);
    if (!ok) {
      failed = "cannot write " + tmp + ": " + std::strerror(saved);
    } else if (::rename(tmp.c_str(), path->c_str()) != 0) {
      failed = "cannot rename " + tmp + " to " + *path + ": " + std::strerror(errno);
    }
    if (!failed.empty()) ::unlink(tmp.c_str());
  }
  if (!failed.empty()) {
    static bool warned = false;
    if (!warned) {
      warned = true;
      std::cerr << "volt: TORCHELASTIC_ERROR_FILE=" << *path << " was not written (" << failed
                << "); torchrun's summary will show error_file: <N/A>. The error was: " << e.what() << std::endl;
    }
    return false;
  }
  return true;
}

}  // namespace volt::environments
