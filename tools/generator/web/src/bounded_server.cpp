#include "bounded_server.h"

#if VOLT_HTTPLIB_0_11

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

namespace volt::generator::web::detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Waits until sock is ready for `events`, at most `wait`; false on timeout or error.
bool wait_for(socket_t sock, short events, milliseconds wait) {
  if (wait.count() <= 0) return false;
  pollfd p{sock, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(wait.count(), 1 << 30)));
    if (n < 0 && errno == EINTR) continue;
    return n > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// One connection's stream: reads are buffered across requests, and every read or write waits at most until
// the earlier of the next io_timeout and the current request's deadline.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, const ConnectionLimits& limits) : sock_(sock), limits_(limits) {}

  // Waits (keep-alive) for the next request; true when its first bytes are here.
  bool next_request(const std::atomic<socket_t>& listening) {
    const auto until = Clock::now() + limits_.keep_alive;
    while (pos_ == buffer_.size()) {
      if (listening == INVALID_SOCKET) return false;  // the server is stopping
      const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
      if (left.count() <= 0) return false;
      if (wait_for(sock_, POLLIN, std::min(left, milliseconds(100)))) break;
    }
    deadline_ = Clock::now() + limits_.request_timeout;
    write_deadline_.reset();
    return true;
  }

  bool is_readable() const override { return pos_ < buffer_.size() || wait_for(sock_, POLLIN, wait()); }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, write_wait()); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == buffer_.size()) {
      if (!wait_for(sock_, POLLIN, wait())) return -1;
      buffer_.resize(4096);
      ssize_t n;
      do {
        n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
      } while (n < 0 && errno == EINTR);
      buffer_.resize(n > 0 ? static_cast<size_t>(n) : 0);
      pos_ = 0;
      if (n <= 0) return n;
    }
    const size_t n = std::min(size, buffer_.size() - pos_);
    std::memcpy(ptr, buffer_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    // The answer has its own request_timeout from its first byte: reading the request may have used all of
    // the request's time, legitimately.
    if (!write_deadline_) write_deadline_ = Clock::now() + limits_.request_timeout;
    if (!wait_for(sock_, POLLOUT, write_wait())) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  // The wait for the next byte: io_timeout, cut to what is left of the request's time.
  milliseconds wait() const {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now());
    return std::min(limits_.io_timeout, left);
  }
  milliseconds write_wait() const {
    if (!write_deadline_) return limits_.io_timeout;
    return std::min(limits_.io_timeout, std::chrono::duration_cast<milliseconds>(*write_deadline_ - Clock::now()));
  }

  socket_t sock_;
  const ConnectionLimits& limits_;
  Clock::time_point deadline_ = Clock::now();
  std::optional<Clock::time_point> write_deadline_;
  std::string buffer_;
  size_t pos_ = 0;
};

}  // namespace

bool BoundedServer::process_and_close_socket(socket_t sock) {
  DeadlineStream stream(sock, limits_);
  bool ok = false;
  for (size_t left = limits_.max_requests; left > 0 && stream.next_request(svr_sock_); --left) {
    bool connection_closed = false;
    // The last allowed request is answered with "Connection: close".
    ok = process_request(stream, /*close_connection=*/left == 1, connection_closed, nullptr);
    if (!ok || connection_closed) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace volt::generator::web::detail

#endif  // VOLT_HTTPLIB_0_11
