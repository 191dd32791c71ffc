#pragma once
/// `volt launch [options] -- PROGRAM ARGS...` (see its --help). Returns the exit code.
int cmd_launch(int argc, char** argv);
