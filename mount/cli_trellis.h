// mount/cli_trellis.h — registers `wcodec trellis` (cli_trellis.cpp) with
// the wcodec tool's command line.
// Thread-safety: single-threaded command line.
#pragma once

#include <CLI/CLI.hpp>

// Adds the `trellis` subcommand (and its own subcommands) to `app`.
CLI::App* add_trellis_command(CLI::App& app);
// Runs the parsed `trellis` subcommand; its exit status.
int run_trellis_command();
