// volt-new: `volt new` as its own program, without LibTorch, so that it starts in milliseconds
// (the `volt` binary loads LibTorch before main). Same code and flags: tools/volt/new_command.cpp.
int cmd_new(int argc, char** argv);

int main(int argc, char** argv) { return cmd_new(argc, argv); }
