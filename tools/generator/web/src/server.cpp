#include "volt/generator/web/server.h"

#include <httplib.h>

#include "bounded_server.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace volt::generator::web {

const bool kRequestDeadlineEnforced = detail::kRequestDeadline;

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

detail::ConnectionLimits limits_of(const ServerOptions& o) {
  detail::ConnectionLimits limits;
  limits.io_timeout = std::chrono::seconds(o.io_timeout_s);
  limits.request_timeout = std::chrono::seconds(o.request_timeout_s);
  limits.keep_alive = std::chrono::seconds(1);
  limits.max_requests = o.max_requests_per_connection;
  return limits;
}

struct Server::Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)), http(limits_of(options)) {}
  ServerOptions options;
  detail::BoundedServer http;
  int port = -1;
  std::atomic<bool> stopped{false};
  std::atomic<bool> serving{false};
  std::mutex log_mutex;

  // Behind a loopback address only Host names of this machine are answered: a page of another site that
  // rebinds its DNS name to 127.0.0.1 sends its own name as Host and gets 403.
  bool host_header_allowed(const std::string& host_header) const {
    if (!is_loopback_host(options.host)) return true;
    std::string name = host_header;
    const auto colon = name.rfind(':');
    if (colon != std::string::npos && name.find(']') == std::string::npos) name = name.substr(0, colon);
    if (colon != std::string::npos && name.rfind("[", 0) == 0) name = name.substr(0, name.find(']') + 1);
    return is_loopback_host(name);
  }

  void answer(const httplib::Request& req, httplib::Response& res) {
    const auto start = std::chrono::steady_clock::now();
    // A chunked body has no Content-Length to refuse it by in advance: it is read, then refused here.
    const Response out =
        req.body.size() > options.max_body_bytes
            ? error_response(400, "the request body has " + std::to_string(req.body.size()) + " bytes; the limit is " +
                                      std::to_string(options.max_body_bytes) +
                                      " bytes (a full set of options is well under 2 KiB)")
            : handle(Request{req.method, req.path, req.get_header_value("Content-Type"), req.body});
    res.status = out.status;
    for (const auto& [name, value] : out.headers) res.set_header(name, value);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(out.body, out.content_type.c_str());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (req.path.rfind("/api/", 0) == 0) {
      std::lock_guard<std::mutex> lock(log_mutex);
      std::fprintf(stderr, "volt ui: %s %s -> %d (%zu bytes, %.1f ms)\n", req.method.c_str(), req.path.c_str(),
                   out.status, out.body.size(), ms);
    }
  }
};

namespace {

ServerOptions checked(ServerOptions options) {
  if (options.host.empty()) throw std::invalid_argument("--host is empty; give an address such as 127.0.0.1");
  if (options.port < 0 || options.port > 65535) {
    throw std::invalid_argument("--port " + std::to_string(options.port) +
                                " is not a TCP port; use 1..65535, or 0 for any free port");
  }
  if (options.max_body_bytes == 0) throw std::invalid_argument("max_body_bytes must be positive");
  if (options.worker_threads == 0 || options.worker_threads > 4096) {
    throw std::invalid_argument("worker_threads " + std::to_string(options.worker_threads) +
                                " is not a worker count; use 1..4096");
  }
  for (const auto& [name, value] : {std::pair<const char*, int>{"io_timeout_s", options.io_timeout_s},
                                    std::pair<const char*, int>{"request_timeout_s", options.request_timeout_s}}) {
    if (value <= 0 || value > 3600) {
      throw std::invalid_argument(std::string(name) + " " + std::to_string(value) + " is not a timeout; use 1..3600");
    }
  }
  if (options.max_requests_per_connection == 0) {
    throw std::invalid_argument("max_requests_per_connection must be positive");
  }
  return options;
}

}  // namespace

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(checked(std::move(options)))) {
  Impl* impl = impl_.get();
  impl->http.set_payload_max_length(impl->options.max_body_bytes);
  // cpp-httplib serves one connection per worker thread, and its default pool has max(8, cores - 1) of them:
  // 8 clients that send their headers a byte at a time held every worker, and the page stopped answering
  // anyone. Many idle workers cost little (a thread each, blocked); a client holds at most one of them, and
  // (BoundedServer) for at most request_timeout_s per request and max_requests_per_connection requests.
  const size_t workers = impl->options.worker_threads;
  impl->http.new_task_queue = [workers] { return new detail::WorkerPool(workers); };
  // A browser keeps its connections open; stop() waits for them, so keep-alive is short (Ctrl-C returns in ~1 s).
  impl->http.set_keep_alive_timeout(1);
  // cpp-httplib sets SO_REUSEPORT by default, which lets a second `volt ui` bind the same port silently and
  // share its connections. SO_REUSEADDR alone still allows a restart while old connections are in TIME_WAIT.
  impl->http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Before the body is read: refuse a declared body over the limit at once (cpp-httplib alone would first
  // wait for and skip all of it), and a foreign Host name.
  impl->http.set_pre_routing_handler([impl](const httplib::Request& req, httplib::Response& res) {
    Response out;
    const std::string host_header = req.get_header_value("Host");
    const std::string length = req.get_header_value("Content-Length");
    const auto declared = volt::numbers::parse_uint(length, 0, impl->options.max_body_bytes);
    if (!impl->host_header_allowed(host_header)) {
      out = error_response(403, "this server answers only requests for 127.0.0.1 or localhost; Host was '" +
                                    volt::printable(host_header) + "'");
    } else if (!length.empty() && !declared && length.find_first_not_of("0123456789") == std::string::npos) {
      out = error_response(400, "the request body has " + length + " bytes; the limit is " +
                                    std::to_string(impl->options.max_body_bytes) +
                                    " bytes (a full set of options is well under 2 KiB)");
    } else if (!length.empty() && !declared) {
      out = error_response(400, "the Content-Length header '" + volt::printable(length) + "' " + declared.problem +
                                    "; it must be the body's size in bytes");
    } else {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    res.status = out.status;
    // The unread body must not be taken for the next request.
    res.set_header("Connection", "close");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(out.body, out.content_type.c_str());
    return httplib::Server::HandlerResponse::Handled;
  });
  const auto route = [impl](const httplib::Request& req, httplib::Response& res) { impl->answer(req, res); };
  impl->http.Get(".*", route);
  impl->http.Post(".*", route);
  impl->http.Put(".*", route);
  impl->http.Patch(".*", route);
  impl->http.Delete(".*", route);
  impl->http.Options(".*", route);
  // cpp-httplib answers some requests itself (a body over the limit: 413, which the API reports as 400; a malformed request: 400) with an
  // empty body; give those the API's JSON message.
  impl->http.set_error_handler([impl](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "bad request";
    if (res.status == 413) {
      res.status = 400;  // the contract: every refused body is a 400 with a message
      message = "the request body is too large; the limit is " + std::to_string(impl->options.max_body_bytes) +
                " bytes (a full set of options is well under 2 KiB)";
    } else if (res.status == 404) {
      message = "no such page or API; the page is at /";
    }
    const Response out = error_response(res.status, message);
    res.set_content(out.body, out.content_type.c_str());
  });
}

Server::~Server() {
  stop();
}

int Server::bind() {
  const auto& o = impl_->options;
  if (o.port == 0) {
    impl_->port = impl_->http.bind_to_any_port(o.host);
  } else {
    impl_->port = impl_->http.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (impl_->port < 0) {
    throw std::runtime_error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             ": the port is in use or the host is not an address of this machine; choose another "
                             "--port (0 picks a free one) or --host");
  }
  return impl_->port;
}

void Server::serve() {
  if (impl_->port < 0) throw std::logic_error("Server::serve() needs a successful bind() first");
  impl_->serving = true;
  if (!impl_->stopped) impl_->http.listen_after_bind();
  impl_->serving = false;
}

void Server::stop() {
  impl_->stopped = true;
  // serve() may be between its check of `stopped` and the start of listening, when httplib's stop() is a no-op:
  // wait (at most 2 s) until it listens, then stop it.
  for (int i = 0; i < 2000 && impl_->serving && !impl_->http.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->http.stop();
}

std::string Server::url() const {
  const std::string& host = impl_->options.host;
  const std::string shown = host.find(':') != std::string::npos && host[0] != '[' ? "[" + host + "]" : host;
  return "http://" + shown + ":" + std::to_string(impl_->port) + "/";
}

}  // namespace volt::generator::web
