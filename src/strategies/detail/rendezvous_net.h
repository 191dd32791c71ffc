#pragma once
/// The sockets and files of the ddp rendezvous: name resolution, the one address rank 0's
/// store listens on, and (LibTorch < 2.3, whose TCPStore cannot be told an address) the
/// private file store that replaces TCP when MASTER_ADDR is a loopback address.
#include <sys/socket.h>

#include <chrono>
#include <string>

namespace volt::strategies::detail {

/// Empty when `host` resolves to an IPv4 or IPv6 address; else why not.
std::string resolve_error(const std::string& host);

/// "localhost", 127.0.0.0/8 or ::1.
bool is_loopback(const std::string& host);

/// The address of this machine on the route to `host`: what the other ranks reach us at.
std::string local_address_towards(const std::string& host, int port);

/// True when something accepts TCP connections at host:port (tried for at most ~1 s).
bool port_accepts(const std::string& host, int port);

/// The one address a listening socket for `host` should be bound to: `host`'s own, when it
/// is a loopback or another specific address (not the wildcard). family == AF_UNSPEC: none
/// (the wildcard, or a name that does not resolve).
struct ListenAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_UNSPEC;
  std::string text;
};
ListenAddress specific_listen_address(const std::string& host, int port);

/// A listening socket bound to `where` only, or -1 with errno set.
int listen_on(const ListenAddress& where);

/// The rendezvous of a job whose every rank is on this host (MASTER_ADDR is a loopback
/// address) without a TCP store. Rank 0 holds MASTER_PORT on the loopback address only (the
/// lease: proof that no other live job uses this port, and the signal that the store is
/// ready), creates a fresh store file with a random name in a folder only this user can
/// read, and names that file in a pointer file. The other ranks wait until the lease
/// accepts connections, then read the pointer. Everything lives in /tmp/volt-<uid>/.
class LocalStoreLease {
 public:
  LocalStoreLease() = default;
  LocalStoreLease(const LocalStoreLease&) = delete;
  LocalStoreLease& operator=(const LocalStoreLease&) = delete;
  ~LocalStoreLease();

  /// Rank 0: takes the port and prepares a fresh store file; returns its path. Throws a
  /// DistributedError (the port is taken, the folder is not private) saying what to do.
  std::string open_as_rank0(const std::string& who, const std::string& addr, int port);
  /// Another rank, after port_accepts(addr, port): the store file rank 0 prepared.
  static std::string store_path_for(const std::string& who, const std::string& addr, int port);

 private:
  int fd_ = -1;
  std::string pointer_;
};

}  // namespace volt::strategies::detail
