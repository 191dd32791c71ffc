#pragma once
/// `volt plot RUN_DIR... [--metrics a,b] [--out curves.png|curves.svg]` (see its --help). Returns
/// the exit code: 0, or 2 with one line on stderr for bad input.
int cmd_plot(int argc, char** argv);
