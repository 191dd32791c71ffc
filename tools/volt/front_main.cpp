// The `volt` command's front end. `volt new` and `volt ui` run here, in a process without
// LibTorch, so they start in milliseconds (loading LibTorch alone takes about a second on
// the development machines). Every other command needs LibTorch: this process becomes
// volt-core, installed next to it, with the same arguments. `volt plot` runs here too (it reads CSV
// files and writes images).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

int cmd_new(int argc, char** argv);  // tools/volt/new_command.cpp
int cmd_ui(int argc, char** argv);   // tools/volt/ui_command.cpp
int cmd_plot(int argc, char** argv); // tools/volt/plot_command.cpp

int main(int argc, char** argv) {
  if (argc >= 2) {
    const std::string cmd = argv[1];
    if (cmd == "new") return cmd_new(argc - 1, argv + 1);
#ifdef VOLT_WITH_UI
    if (cmd == "ui") return cmd_ui(argc - 1, argv + 1);
#else
    if (cmd == "ui") {
      std::cerr << "volt ui: this volt was built without its web page (configured with -DVOLT_BUILD_UI=OFF). "
                   "Use `volt new` on the command line, or build Volt with -DVOLT_BUILD_UI=ON (it needs cpp-httplib "
                   "and node-prismjs).\n";
      return 2;
    }
#endif
    if (cmd == "plot") return cmd_plot(argc - 1, argv + 1);
  }
  char self[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv[0]);
  dir = dir.substr(0, dir.find_last_of('/') + 1);
  const std::string core = dir + "volt-core";
  std::vector<char*> args(argv, argv + argc);
  args[0] = const_cast<char*>(core.c_str());
  args.push_back(nullptr);
  ::execv(core.c_str(), args.data());
  std::cerr << "volt: cannot run " << core << " (" << std::strerror(errno)
            << "), which does every command but new, ui and plot. Reinstall Volt so that volt-core sits next to volt.\n";
  return 127;
}
