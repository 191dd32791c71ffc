// volt::generator::web::Server — serves handle() over HTTP on one address (cpp-httplib, kept out of this header).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "volt/generator/web/api.h"

namespace volt::generator::web {

/// Where and how `volt ui` listens.
struct ServerOptions {
  std::string host = "127.0.0.1";              ///< address to bind; only loopback unless the user asks
  int port = 8765;                             ///< 0 picks a free port
  std::size_t max_body_bytes = kMaxBodyBytes;  ///< larger bodies get 400 before they are read
  /// Connections served at once, one worker thread each (started with the server, idle until used). A client
  /// that sends its request slowly holds one worker; the others keep answering. Connections beyond this wait.
  std::size_t worker_threads = 128;
  /// Seconds a worker waits for the next bytes of a request (or to send a response) before it drops the
  /// connection, so that a client that stops sending gives its worker back.
  int io_timeout_s = 5;
  /// Seconds a client has to send one whole request (head and body), and again to receive its answer; a
  /// connection that takes longer is closed. Bounds how long a client that trickles its bytes holds a worker.
  /// (Enforced with Debian 12's cpp-httplib 0.11; with other versions only io_timeout_s applies.)
  int request_timeout_s = 10;
  /// Requests one connection may send before the server closes it (the client reconnects), so that a client
  /// cannot keep a worker to itself by sending request after request.
  std::size_t max_requests_per_connection = 100;
};

/// True when this build closes a connection whose request takes longer than request_timeout_s (cpp-httplib 0.11).
extern const bool kRequestDeadlineEnforced;

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

/// An HTTP server for the page and the API. bind() then serve() (blocks) — stop() from another thread ends serve().
class Server {
 public:
  /// Checks the options (port in 0..65535, host not empty, 1..4096 workers, timeouts 1..3600 s); throws
  /// std::invalid_argument with what to change.
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds the address and returns the port (the chosen one when port was 0); throws std::runtime_error when
  /// the address cannot be bound (in use, not an address of this machine).
  int bind();
  /// Answers requests until stop(); requires bind().
  void serve();
  /// Makes serve() return; safe from any thread and before serve() starts.
  void stop();
  /// "http://HOST:PORT/" for the bound port.
  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace volt::generator::web
