#include "strategies/detail/rendezvous_net.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <random>

#include "volt/core/error.h"

namespace volt::strategies::detail {

std::string resolve_error(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (res != nullptr) freeaddrinfo(res);
  return rc == 0 ? "" : gai_strerror(rc);
}

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  return host == "::1";
}

std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr) return "";
  std::string out;
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof(local);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        char buf[INET_ADDRSTRLEN] = {};
        if (inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf)) != nullptr) out = buf;
      }
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return out;
}

bool port_accepts(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr) return false;
  bool ok = false;
  for (addrinfo* a = res; a != nullptr && !ok; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 1000) == 1) {
        int err = 0;
        socklen_t len = sizeof(err);
        ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      }
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

ListenAddress specific_listen_address(const std::string& host, int port) {
  ListenAddress out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr) return out;
  // The first IPv4 address if there is one (what the other ranks' clients try first on
  // "localhost" is not certain, so a name with both is bound on its IPv4 address).
  const addrinfo* pick = res;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  bool wildcard = false;
  char buf[INET6_ADDRSTRLEN] = {};
  if (pick->ai_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(pick->ai_addr);
    wildcard = in->sin_addr.s_addr == htonl(INADDR_ANY);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
  } else if (pick->ai_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(pick->ai_addr);
    wildcard = IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
  } else {
    wildcard = true;
  }
  if (!wildcard) {
    std::memcpy(&out.addr, pick->ai_addr, pick->ai_addrlen);
    out.len = static_cast<socklen_t>(pick->ai_addrlen);
    out.family = pick->ai_family;
    out.text = buf;
  }
  freeaddrinfo(res);
  return out;
}

namespace {

/// A socket bound to `where` only, not listening yet, or -1 with errno set.
int bound_to(const ListenAddress& where) {
  const int fd = ::socket(where.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&where.addr), where.len) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

/// Starts listening on a bound socket; false (and the socket closed) with errno set.
bool start_listening(int fd) {
  if (::listen(fd, 2048) == 0) return true;
  const int err = errno;
  ::close(fd);
  errno = err;
  return false;
}

}  // namespace

int listen_on(const ListenAddress& where) {
  const int fd = bound_to(where);
  return fd >= 0 && start_listening(fd) ? fd : -1;
}

namespace {

/// /tmp/volt-<uid>: made if missing; refused unless it is a real folder of this user that
/// nobody else may enter (the store's keys would otherwise be readable, or replaceable).
std::string private_folder(const std::string& who) {
  const std::string dir = "/tmp/volt-" + std::to_string(::geteuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw DistributedError(who + " cannot create the rendezvous folder " + dir + ": " + std::strerror(errno) +
                           ". Make /tmp writable, or set MASTER_ADDR to this host's network address.");
  }
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0) {
    throw DistributedError(who + ": the rendezvous folder " + dir +
                           " is not a private folder of this user (it must be a directory, owned by uid " +
                           std::to_string(::geteuid()) + ", mode 0700). Remove it, or chmod 700 it if it is yours.");
  }
  return dir;
}

/// The file name part for an address: no '/' and nothing the shell would mind.
std::string tag(const std::string& addr, int port) {
  std::string out;
  for (char c : addr) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out + "-" + std::to_string(port);
}

std::string random_hex() {
  std::random_device rd;
  std::string out;
  static const char* digits = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    const unsigned v = rd();
    for (int k = 0; k < 8; ++k) out += digits[(v >> (4 * k)) & 0xF];
  }
  return out;
}

void write_atomically(const std::string& path, const std::string& text, const std::string& who) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (ok) ok = ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    ::unlink(tmp.c_str());
    throw DistributedError(who + " cannot write the rendezvous file " + path + ": " + std::strerror(err ? err : errno) +
                           ". Free space in /tmp, or set MASTER_ADDR to this host's network address.");
  }
}

}  // namespace

LocalStoreLease::~LocalStoreLease() {
  if (!pointer_.empty()) ::unlink(pointer_.c_str());
  if (fd_ >= 0) ::close(fd_);
}

std::string LocalStoreLease::open_as_rank0(const std::string& who, const std::string& addr, int port) {
  const ListenAddress where = specific_listen_address(addr, port);
  const std::string at = addr + ":" + std::to_string(port);
  if (where.family == AF_UNSPEC) {
    throw DistributedError(who + ": MASTER_ADDR=" + addr + " does not resolve to one loopback address.");
  }
  // Bound first (the port is ours), listening last: a rank connects only once the
  // pointer below names this job's store file, never a dead job's.
  fd_ = bound_to(where);
  const auto refuse = [&](int err) {
    return DistributedError(who + " could not open the rendezvous at " + at + ": " + std::strerror(err) +
                            ". The port is in use (another job, or a previous run still exiting): set "
                            "MASTER_PORT to a free port, or leave it unset for a single-node job.");
  };
  if (fd_ < 0) throw refuse(errno);
  // Nobody else uses this address and port now: files left by a dead job on it go.
  const std::string dir = private_folder(who);
  const std::string prefix = "store-" + tag(addr, port) + "-";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) ::unlink((dir + "/" + e->d_name).c_str());
    }
    ::closedir(d);
  }
  const std::string name = prefix + random_hex();
  pointer_ = dir + "/rendezvous-" + tag(addr, port);
  write_atomically(pointer_, name, who);
  if (!start_listening(fd_)) {
    fd_ = -1;
    throw refuse(errno);
  }
  return dir + "/" + name;
}

std::string LocalStoreLease::store_path_for(const std::string& who, const std::string& addr, int port) {
  const std::string dir = private_folder(who);
  const std::string pointer = dir + "/rendezvous-" + tag(addr, port);
  std::string name;
  const int fd = ::open(pointer.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    char buf[128];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) name.assign(buf, static_cast<size_t>(n));
    ::close(fd);
  }
  const std::string prefix = "store-" + tag(addr, port) + "-";
  if (name.compare(0, prefix.size(), prefix) != 0 || name.find('/') != std::string::npos) {
    throw DistributedError(who + ": something accepts connections at " + addr + ":" + std::to_string(port) +
                           " but it is not a Volt rank 0 of this user (no rendezvous file " + pointer +
                           "). Set MASTER_PORT to a port no other program uses.");
  }
  return dir + "/" + name;
}

}  // namespace volt::strategies::detail
