// `volt ui`'s HTTP server on a real socket: loopback by default, the body limit enforced before the body is read,
// foreign Host names refused, clear errors for a taken port or a bad one, and nothing written to disk.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "volt/generator/generator.h"
#include "volt/generator/web/server.h"

namespace web = volt::generator::web;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A server on a free loopback port, serving on its own thread for the test's lifetime.
class RunningServer {
 public:
  explicit RunningServer(web::ServerOptions options = {})
      : server_([&] {
          options.port = 0;
          return options;
        }()) {
    port_ = server_.bind();
    thread_ = std::thread([this] { server_.serve(); });
  }
  ~RunningServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5);
    c.set_read_timeout(10);
    return c;
  }

 private:
  web::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// A TCP connection to the server on loopback; -1 when it cannot be made.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string server_first_template() {
  return volt::generator::templates().at(0).at("id");
}

}  // namespace

TEST(UiServer, ListensOnLoopbackByDefault) {
  EXPECT_EQ(web::ServerOptions{}.host, "127.0.0.1");
  EXPECT_TRUE(web::is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(web::is_loopback_host("localhost"));
  EXPECT_TRUE(web::is_loopback_host("::1"));
  EXPECT_FALSE(web::is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(web::is_loopback_host("192.168.1.5"));
  RunningServer s;
  auto c = s.client();
  const auto page = c.Get("/");
  ASSERT_TRUE(page) << httplib::to_string(page.error());
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");
  const auto schema = c.Get("/api/schema");
  ASSERT_TRUE(schema);
  EXPECT_EQ(json::parse(schema->body)["options"], volt::generator::option_schema());
}

TEST(UiServer, RendersOverHttp) {
  RunningServer s;
  auto c = s.client();
  const auto r = c.Post("/api/render", json{{"template", server_first_template()}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(json::parse(r->body)["files"].empty());
  // Refused options: the generator's answer (200, problems) from render, a 400 from a download.
  const auto bad = c.Post("/api/render", R"({"colour": 1})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 200);
  EXPECT_EQ(json::parse(bad->body)["problems"][0]["option"], "colour");
  const auto bad_zip = c.Post("/api/zip", R"({"colour": 1})", "application/json");
  ASSERT_TRUE(bad_zip);
  EXPECT_EQ(bad_zip->status, 400);
  EXPECT_EQ(json::parse(bad_zip->body)["problems"][0]["option"], "colour");
}

TEST(UiServer, BodyOverTheLimitIs400WithAMessage) {
  web::ServerOptions options;
  options.max_body_bytes = 4096;
  RunningServer s(options);
  auto c = s.client();
  const auto r = c.Post("/api/render", std::string(10000, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(json::parse(r->body)["error"].get<std::string>().find("the limit is 4096 bytes"), std::string::npos)
      << r->body;
  // The server still answers afterwards.
  auto c2 = s.client();
  const auto ok = c2.Get("/api/schema");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(UiServer, DeclaredOversizeBodyIsRefusedBeforeItIsSent) {
  RunningServer s;
  // Headers only, announcing 10 MB: the answer must come without the body.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(s.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval timeout{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const std::string head =
      "POST /api/render HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 10000000\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  // The answer may come in several pieces (headers, then body); the server closes the connection after it.
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  ASSERT_FALSE(answer.empty()) << "no answer within 3 s: the server waited for the body";
  EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
  EXPECT_NE(answer.find("the limit is 65536 bytes"), std::string::npos) << answer;
}

TEST(UiServer, ChunkedBodyOverTheLimitIs400WithAMessage) {
  web::ServerOptions options;
  options.max_body_bytes = 4096;
  RunningServer s(options);
  auto c = s.client();
  // Chunked, so without a Content-Length to refuse it by: read, then refused.
  const std::string big(20000, ' ');
  size_t sent = 0;
  const auto r = c.Post(
      "/api/render",
      [&](size_t, httplib::DataSink& sink) {
        if (sent >= big.size()) {
          sink.done();
          return true;
        }
        sink.write(big.data() + sent, 1000);
        sent += 1000;
        return true;
      },
      "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("the limit is 4096 bytes"), std::string::npos) << r->body;
}

TEST(UiServer, RefusesForeignHostNamesOnLoopback) {
  RunningServer s;
  auto c = s.client();
  const auto rebound = c.Get("/api/schema", httplib::Headers{{"Host", "attacker.example:8765"}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403);
  EXPECT_NE(json::parse(rebound->body)["error"].get<std::string>().find("attacker.example"), std::string::npos);
  const auto local = c.Get("/api/schema", httplib::Headers{{"Host", "localhost:" + std::to_string(s.port())}});
  ASSERT_TRUE(local);
  EXPECT_EQ(local->status, 200);
}

TEST(UiServer, TakenPortFailsWithAClearMessage) {
  RunningServer s;
  web::ServerOptions options;
  options.port = s.port();
  web::Server second(options);
  try {
    second.bind();
    FAIL() << "binding a taken port succeeded";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(s.port())), std::string::npos) << what;
    EXPECT_NE(what.find("in use"), std::string::npos) << what;
  }
}

TEST(UiServer, BadOptionsAreRejectedBeforeListening) {
  web::ServerOptions options;
  options.port = 70000;
  EXPECT_THROW(web::Server{options}, std::invalid_argument);
  options.port = 8765;
  options.host = "";
  EXPECT_THROW(web::Server{options}, std::invalid_argument);
  options.host = "not-an-address.invalid";
  web::Server unknown(options);
  EXPECT_THROW(unknown.bind(), std::runtime_error);
}

TEST(UiServer, StopBeforeServeReturnsAtOnce) {
  web::ServerOptions options;
  options.port = 0;
  web::Server server(options);
  server.bind();
  server.stop();
  server.serve();  // would block forever if stop() had been lost
  SUCCEED();
}

TEST(UiServer, NeverWritesToDisk) {
  const fs::path dir = fs::temp_directory_path() / ("volt_ui_cwd_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  {
    RunningServer s;
    auto c = s.client();
    const std::string options = json{{"template", server_first_template()}, {"name", "nodisk"}}.dump();
    for (const char* path : {"/api/validate", "/api/render", "/api/zip", "/api/notebook"}) {
      const auto r = c.Post(path, options, "application/json");
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, 200) << path;
    }
  }
  fs::current_path(before);
  EXPECT_TRUE(fs::is_empty(dir)) << "the server wrote into its working directory " << dir;
  fs::remove_all(dir);
}

// Clients that send their request a byte at a time (well within the read timeout, so none is dropped) each hold
// a worker; with cpp-httplib's default pool (8 workers on a small machine) 8 of them stopped the page answering
// anyone. 30 of them, while someone uses the page normally: every normal request is answered in under 1 s.
TEST(UiServer, ThirtyTricklingClientsDoNotStopNormalUse) {
  RunningServer s;
  constexpr int kTricklers = 30;
  std::atomic<bool> done{false};
  std::atomic<int> connected{0};
  std::vector<std::thread> tricklers;
  // However the test ends, the tricklers stop before the server does (stop() waits for its workers).
  struct Joiner {
    std::atomic<bool>& done;
    std::vector<std::thread>& threads;
    ~Joiner() {
      done = true;
      for (auto& t : threads) t.join();
    }
  } joiner{done, tricklers};
  for (int t = 0; t < kTricklers; ++t) {
    tricklers.emplace_back([&] {
      const int fd = connect_to(s.port());
      if (fd < 0) return;
      ++connected;
      const std::string head = "GET /api/schema HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
      ::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
      // A byte every 100 ms, never ending the header, until the test is over (at most 20 s).
      for (int i = 0; i < 200 && !done; ++i) {
        ::send(fd, "a", 1, MSG_NOSIGNAL);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      ::close(fd);
    });
  }
  // Every trickler is connected and has been handed to a worker before the normal requests start.
  for (int i = 0; i < 100 && connected < kTricklers; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(connected.load(), kTricklers);
  double slowest_ms = 0;
  for (int i = 0; i < 10; ++i) {
    httplib::Client c("127.0.0.1", s.port());
    c.set_connection_timeout(2);
    c.set_read_timeout(2);
    const auto start = std::chrono::steady_clock::now();
    const auto r = i % 2 == 0
                       ? c.Get("/api/schema")
                       : c.Post("/api/validate", json{{"template", server_first_template()}}.dump(), "application/json");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    slowest_ms = std::max(slowest_ms, ms);
    ASSERT_TRUE(r) << "request " << i << " got no answer within 2 s: " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_LT(slowest_ms, 1000.0);
}

TEST(UiServer, ClientThatStopsSendingIsDroppedAfterTheReadTimeout) {
  web::ServerOptions options;
  options.io_timeout_s = 1;
  RunningServer s(options);
  const int fd = connect_to(s.port());
  ASSERT_GE(fd, 0);
  const std::string head = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n";  // and then nothing
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const auto start = std::chrono::steady_clock::now();
  // The server may answer 400 before it closes; what matters is that it closes (recv gives 0), and soon.
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
  }
  const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  EXPECT_EQ(n, 0) << "the server did not close a silent connection within 5 s";
  EXPECT_LT(waited_s, 4.0);
}

// One response read off fd: the head, then Content-Length bytes of body. "" when the server closed first.
std::string read_response(int fd) {
  std::string data;
  char c;
  while (data.size() < 4 || data.compare(data.size() - 4, 4, "\r\n\r\n") != 0) {
    if (::recv(fd, &c, 1, 0) != 1) return "";
    data += c;
  }
  const auto at = data.find("Content-Length: ");
  size_t length = at == std::string::npos ? 0 : std::stoul(data.substr(at + 16));
  std::string body(length, '\0');
  for (size_t got = 0; got < length;) {
    const ssize_t n = ::recv(fd, body.data() + got, length - got, 0);
    if (n <= 0) return "";
    got += static_cast<size_t>(n);
  }
  return data + body;
}

TEST(UiServer, ConnectionIsClosedAfterTheRequestLimit) {
  web::ServerOptions options;
  options.max_requests_per_connection = 3;
  RunningServer s(options);
  const int fd = connect_to(s.port());
  ASSERT_GE(fd, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const std::string request = "GET /api/schema HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  int answered = 0;
  for (int i = 0; i < 5; ++i) {
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) break;
    const std::string response = read_response(fd);
    if (response.rfind("HTTP/1.1 200", 0) != 0) break;
    ++answered;
  }
  ::close(fd);
  EXPECT_EQ(answered, 3);
}

// Sends `head` and then a byte every 100 ms for up to 20 s on a thread; stops when the server closes the
// connection. seconds() is how long the server kept it.
class Trickler {
 public:
  Trickler(int port, std::string head) : fd_(connect_to(port)), start_(std::chrono::steady_clock::now()) {
    thread_ = std::thread([this, head] {
      if (fd_ < 0) return;
      ::send(fd_, head.data(), head.size(), MSG_NOSIGNAL);
      for (int i = 0; i < 200 && !stop_; ++i) {
        if (::send(fd_, "a", 1, MSG_NOSIGNAL) != 1) break;  // the server closed it
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) > 0) {
          char buf[4096];
          if (::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT) == 0) break;  // closed (an answer may come first)
        }
      }
      seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    });
  }
  ~Trickler() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  // Waits until the server has closed the connection (or 20 s have passed).
  double seconds() {
    if (thread_.joinable()) thread_.join();
    return seconds_;
  }

 private:
  int fd_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> stop_{false};
  double seconds_ = 0;
  std::thread thread_;
};

TEST(UiServer, ClientThatTricklesItsHeadIsDroppedAtTheRequestTimeout) {
  if (!web::kRequestDeadlineEnforced) GTEST_SKIP() << "this cpp-httplib has no per-request deadline in Volt";
  web::ServerOptions options;
  options.request_timeout_s = 1;
  RunningServer s(options);
  Trickler slow(s.port(), "GET /api/schema HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
  const double held = slow.seconds();
  EXPECT_GT(held, 0.8);
  EXPECT_LT(held, 3.0) << "a client that kept sending a byte every 100 ms held its worker for " << held << " s";
}

TEST(UiServer, ClientThatTricklesItsBodyIsDroppedAtTheRequestTimeout) {
  if (!web::kRequestDeadlineEnforced) GTEST_SKIP() << "this cpp-httplib has no per-request deadline in Volt";
  web::ServerOptions options;
  options.request_timeout_s = 1;
  RunningServer s(options);
  Trickler slow(s.port(),
                "POST /api/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Content-Length: 1000\r\n\r\n");
  EXPECT_LT(slow.seconds(), 3.0);
}

TEST(UiServer, StopIsNotHeldUpByATricklingClient) {
  // Without the deadline (cpp-httplib other than 0.11) stop() waits for the trickler: 25 s with 0.18.7.
  if (!web::kRequestDeadlineEnforced) GTEST_SKIP() << "this cpp-httplib has no per-request deadline in Volt";
  web::ServerOptions options;
  options.request_timeout_s = 1;
  auto s = std::make_unique<RunningServer>(options);
  Trickler slow(s->port(), "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  s.reset();  // stop() and join serve()
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 3.0);
}

TEST(UiServer, PipelinedRequestsAreAllAnswered) {
  RunningServer s;
  const int fd = connect_to(s.port());
  ASSERT_GE(fd, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string requests;
  for (int i = 0; i < 4; ++i) requests += "GET /api/schema HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  requests += "GET /api/schema HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(fd, requests.data(), requests.size(), MSG_NOSIGNAL), static_cast<ssize_t>(requests.size()));
  int answered = 0;
  while (read_response(fd).rfind("HTTP/1.1 200", 0) == 0) ++answered;
  ::close(fd);
  if (!web::kRequestDeadlineEnforced) GTEST_SKIP() << "cpp-httplib's own loop drops pipelined requests";
  EXPECT_EQ(answered, 5);
}

TEST(UiServer, NonNumericContentLengthIs400NamingIt) {
  RunningServer s;
  const int fd = connect_to(s.port());
  ASSERT_GE(fd, 0);
  timeval timeout{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const std::string head =
      "POST /api/render HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 12abc\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
}

TEST(UiServer, BadLimitsAreRejected) {
  web::ServerOptions none;
  none.worker_threads = 0;
  EXPECT_THROW(web::Server{none}, std::invalid_argument);
  web::ServerOptions no_timeout;
  no_timeout.io_timeout_s = 0;
  EXPECT_THROW(web::Server{no_timeout}, std::invalid_argument);
  web::ServerOptions no_deadline;
  no_deadline.request_timeout_s = -1;
  EXPECT_THROW(web::Server{no_deadline}, std::invalid_argument);
}
