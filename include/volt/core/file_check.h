#pragma once
#include <cstdint>
#include <string>
#include <system_error>

namespace volt {

/// What a path names, by stat() (symbolic links followed). Used to refuse a folder, a FIFO
/// or a device before anything opens it: open() of a FIFO blocks until a writer appears.
enum class FileKind { kMissing, kRegular, kDirectory, kFifo, kCharDevice, kBlockDevice, kSocket, kOther };

/// The kind of `path`; kMissing when it does not exist (or cannot be stat'ed).
FileKind file_kind(const std::string& path);

/// "a folder", "a FIFO (named pipe)", "a character device", ... for messages.
const char* describe(FileKind kind);

/// `path` in single quotes for a message: bytes that are not valid UTF-8, control
/// characters, quotes and backslashes are written as \xNN (or \' and \\), so a name that is
/// not UTF-8 shows as what it is instead of breaking the terminal.
std::string quote_path(const std::string& path);

/// Empty when `path` is a regular file; otherwise a message that names it, says what it
/// is instead ("... 'x' is a folder, not a file." / "does not exist.") and ends with
/// `hint`. `what` names the role, e.g. "checkpoint" or "IDX file".
std::string regular_file_problem(const std::string& path, const std::string& what, const std::string& hint = "");

/// Empty when `path` is a folder or does not exist yet (it will be created); otherwise
/// a message saying it is a file (or a FIFO, ...) and not a folder, ending with `hint`.
std::string folder_problem(const std::string& path, const std::string& what, const std::string& hint = "");

/// Removes `path` and, for a folder, everything in it (symbolic links themselves, never what they
/// point to), as std::filesystem::remove_all does; returns how many entries went, 0 when `path` did
/// not exist. Errors go to `ec` (the first one; the walk goes on). Volt's own walk over POSIX nftw:
/// PyTorch's pip wheels export a copy of std::filesystem::remove_all from libtorch.so that binds in
/// place of libstdc++'s and jumps to address 0 (seen with torch 2.11+cu130, docs/gpu.md).
std::uintmax_t remove_tree(const std::string& path, std::error_code& ec);

}  // namespace volt
