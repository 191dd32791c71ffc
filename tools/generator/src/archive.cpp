// Names and paths that are safe, option values as text, the zip archive, and writing a project to disk
// atomically.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include <zlib.h>

#include "generator_internal.h"
#include "volt/core/printable.h"
#include "volt/generator/generator.h"

namespace volt::generator {

namespace fs = std::filesystem;

bool validate_name(const std::string& name, std::vector<Problem>& errors) {
  const auto bad = [&](const std::string& why) {
    errors.push_back({"name", "'" + printable(name) + "' " + why +
                                  "; a project name is a letter, then letters, digits, '_' or '-' (64 at most), "
                                  "e.g. fashion_cnn"});
    return false;
  };
  if (name.empty()) return bad("is empty");
  if (name.size() > 64) return bad("is longer than 64 characters");
  if (!std::isalpha(static_cast<unsigned char>(name[0]))) return bad("does not start with a letter");
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return bad("contains '" + printable(std::string(1, c)) + "'");
    }
  }
  return true;
}

nlohmann::json spec_default(const nlohmann::json& schema, const std::string& key) {
  for (const auto& s : schema) {
    if (s["key"] == key) return s["default"];
  }
  return nullptr;
}

std::string option_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array() &&
      std::all_of(value.begin(), value.end(), [](const nlohmann::json& v) { return v.is_string(); })) {
    std::string out;
    for (const auto& v : value) out += (out.empty() ? "" : ",") + v.get<std::string>();
    return out.empty() ? "none" : out;
  }
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=+@") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool is_safe_relative_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.back() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (const char c : part) {
      if (c == '\\' || c == ':' || static_cast<unsigned char>(c) < 0x20) return false;
    }
    start = end + 1;
  }
  return true;
}

namespace {

void put16(std::string& out, uint32_t v) {
  out += static_cast<char>(v & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& out, uint32_t v) {
  put16(out, v & 0xffff);
  put16(out, v >> 16);
}

std::string raw_deflate(const std::string& data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw GeneratorError(std::vector<Problem>{{"zip", "zlib could not start a deflate stream"}});
  }
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw GeneratorError(std::vector<Problem>{{"zip", "zlib deflate failed"}});
  return out;
}

void check_paths(const Project& project) {
  std::vector<Problem> problems;
  validate_name(project.name, problems);
  for (const auto& [path, content] : project.files) {
    if (!is_safe_relative_path(path)) {
      problems.push_back({"path", "'" + path + "' is not a relative path inside the project (no '/' at the start, "
                                  "no '.', '..', '\\' or ':' components)"});
    }
  }
  if (!problems.empty()) throw GeneratorError(problems);
}

}  // namespace

std::string zip_archive(const Project& project) {
  check_paths(project);
  // Fixed time stamp (1 Jan 2024, 00:00), so that the same project gives the same bytes.
  const uint32_t dos_time = 0, dos_date = ((2024 - 1980) << 9) | (1 << 5) | 1;
  std::string out, central;
  uint32_t count = 0;
  for (const auto& [path, content] : project.files) {
    const std::string name = project.name + "/" + path;
    const uint32_t crc = crc32(0L, reinterpret_cast<const Bytef*>(content.data()), static_cast<uInt>(content.size()));
    std::string body = raw_deflate(content);
    uint16_t method = 8;
    if (body.size() >= content.size()) {
      body = content;
      method = 0;
    }
    const uint32_t offset = static_cast<uint32_t>(out.size());
    // content by name: clang before 16 cannot capture a structured binding (the fuzz build uses clang-14).
    auto header = [&, &content = content](std::string& h, bool central_entry) {
      put32(h, central_entry ? 0x02014b50 : 0x04034b50);
      if (central_entry) put16(h, (3 << 8) | 20);  // made by Unix, zip 2.0
      put16(h, 20);
      put16(h, 0x0800);  // names are UTF-8
      put16(h, method);
      put16(h, dos_time);
      put16(h, dos_date);
      put32(h, crc);
      put32(h, static_cast<uint32_t>(body.size()));
      put32(h, static_cast<uint32_t>(content.size()));
      put16(h, static_cast<uint32_t>(name.size()));
      put16(h, 0);
      if (central_entry) {
        put16(h, 0);
        put16(h, 0);
        put16(h, 0);
        put32(h, 0100644u << 16);  // -rw-r--r--
        put32(h, offset);
      }
      h += name;
    };
    header(out, false);
    out += body;
    header(central, true);
    ++count;
  }
  const uint32_t central_offset = static_cast<uint32_t>(out.size());
  out += central;
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, count);
  put16(out, count);
  put32(out, static_cast<uint32_t>(central.size()));
  put32(out, central_offset);
  put16(out, 0);
  return out;
}

namespace {

[[noreturn]] void io_error(const fs::path& path, const std::string& what) {
  throw GeneratorError(std::vector<Problem>{{"output", what + " " + path.string() + ": " + std::strerror(errno)}});
}

// Temp file in the same folder, fsync, rename: a reader sees the old file or the whole new one.
void write_atomically(const fs::path& path, const std::string& content) {
  std::random_device rd;
  const fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp" + std::to_string(rd()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) io_error(tmp, "cannot create");
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      io_error(tmp, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    io_error(tmp, "cannot sync");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    io_error(path, "cannot rename into");
  }
}

void sync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

void write_project(const Project& project, const fs::path& out_dir, bool force) {
  check_paths(project);
  std::error_code ec;
  if (out_dir.empty()) throw GeneratorError(std::vector<Problem>{{"output", "the output folder is empty; give a folder path"}});
  if (fs::exists(out_dir, ec)) {
    if (!fs::is_directory(out_dir, ec)) {
      throw GeneratorError(std::vector<Problem>{{"output", out_dir.string() + " exists and is not a folder; choose another path"}});
    }
    if (!fs::is_empty(out_dir, ec) && !force) {
      throw GeneratorError(std::vector<Problem>{{"output", out_dir.string() +
                                           " is not empty; choose another folder, or pass --force to write the "
                                           "project's files into it (other files are left alone)"}});
    }
  }
  fs::create_directories(out_dir, ec);
  if (ec) throw GeneratorError(std::vector<Problem>{{"output", "cannot create " + out_dir.string() + ": " + ec.message()}});
  const fs::path root = fs::canonical(out_dir);
  for (const auto& [rel, content] : project.files) {
    const fs::path target = root / rel;
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw GeneratorError(std::vector<Problem>{{"output", "cannot create " + target.parent_path().string() + ": " + ec.message()}});
    // A symbolic link inside an existing folder (with --force) must not lead outside it.
    const fs::path real_parent = fs::canonical(target.parent_path());
    const std::string r = root.string(), p = real_parent.string();
    if (p != r && p.compare(0, r.size() + 1, r + "/") != 0) {
      throw GeneratorError(std::vector<Problem>{{"output", target.string() + " would be written outside " + r + " (through " + p +
                                           "); remove the link or choose another folder"}});
    }
    if (fs::is_symlink(target, ec)) {
      throw GeneratorError(std::vector<Problem>{{"output", target.string() + " is a symbolic link; remove it or choose another folder"}});
    }
    write_atomically(target, content);
  }
  sync_dir(root);
}

}  // namespace volt::generator
