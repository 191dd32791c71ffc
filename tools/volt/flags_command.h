#pragma once
/// `volt flags [--markdown | --names]` (see its --help). Returns the exit code.
int cmd_flags(int argc, char** argv);
