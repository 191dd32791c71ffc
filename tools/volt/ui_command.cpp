// `volt ui`: serves the generator's web page and JSON API (tools/generator/web) until Ctrl-C.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include "command_args.h"
#include "volt/core/numbers.h"
#include "volt/core/printable.h"
#include "volt/generator/web/server.h"

extern char** environ;

namespace {

constexpr const char* kUiUsage =
    "usage: volt ui [--port P] [--host H] [--open]\n"
    "Serves the project generator as a web page: pick a template and options, see every generated file, download\n"
    "a zip or a Colab notebook, copy the equivalent `volt new` command. Nothing is written to disk.\n"
    "  --port P   TCP port (default 8765; 0 picks a free one)\n"
    "  --host H   address to listen on (default 127.0.0.1; any other address is reachable from other machines)\n"
    "  --open     open the page in the default browser (xdg-open)\n";

// Starts xdg-open URL without waiting for the browser; false when it cannot be started.
bool open_in_browser(const std::string& url) {
  const char* argv[] = {"xdg-open", url.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, "xdg-open", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) return false;
  // Reap it in the background: xdg-open returns as soon as it has handed the URL over.
  std::thread([pid] { waitpid(pid, nullptr, 0); }).detach();
  return true;
}

}  // namespace

int cmd_ui(int argc, char** argv) {
  volt::generator::web::ServerOptions options;
  bool open = false;
  for (int i = 1; i < argc; ++i) {
    const volt::tools::CommandArg split = volt::tools::split_command_arg(argv[i]);
    std::string arg = split.name;
    const std::string& value = split.value;
    const bool has_value = split.has_value;
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    try {
      if (arg == "--help" || arg == "-h") {
        std::cout << kUiUsage;
        return 0;
      } else if (arg == "--open") {
        if (has_value) throw std::invalid_argument("--open takes no value, got '" + volt::printable(argv[i]) + "'");
        open = true;
      } else if (arg == "--host") {
        options.host = next();
      } else if (arg == "--port") {
        const std::string v = next();
        const auto port = volt::numbers::parse_int(v, 0, 65535);
        if (!port) {
          throw std::invalid_argument("--port '" + volt::printable(v) + "' is not a TCP port: it " + port.problem +
                                      "; use 1..65535, or 0 for any free port");
        }
        options.port = static_cast<int>(*port.value);
      } else {
        throw std::invalid_argument("unknown option '" + volt::printable(arg) + "'");
      }
    } catch (const std::invalid_argument& e) {
      std::cerr << "volt ui: " << e.what() << "\n" << kUiUsage;
      return 2;
    }
  }

  // SIGINT/SIGTERM are taken by one thread with sigwait, which stops the server cleanly (no work in a signal
  // handler). Blocked before the server starts its threads, so that they inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  try {
    volt::generator::web::Server server(options);
    server.bind();
    if (!volt::generator::web::is_loopback_host(options.host)) {
      std::cerr << "volt ui: warning: listening on " << options.host
                << ", so every machine that can reach it can use this page (it never writes files, but it has "
                   "no login). Leave out --host to serve only this machine (127.0.0.1).\n";
    }
    std::cout << "volt ui: serving the generator at " << server.url() << " (Ctrl-C to stop)" << std::endl;
    if (open && !open_in_browser(server.url())) {
      std::cerr << "volt ui: could not start xdg-open; open " << server.url() << " in a browser\n";
    }
    std::atomic<bool> signalled{false};
    std::thread stopper([&server, &signalled, signals] {
      int sig = 0;
      sigwait(&signals, &sig);
      signalled = true;
      server.stop();
    });
    server.serve();
    // serve() returned without a signal (the listening socket failed): wake the stopper with one (blocked in every
    // thread, so it only reaches sigwait).
    if (!signalled) kill(getpid(), SIGTERM);
    stopper.join();
    std::cout << "volt ui: stopped" << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "volt ui: " << e.what() << "\n";
    return 2;
  }
}
