// mount/cli_cawsf.h — `wcodec cawsf ...`: the CAWSF tools (convert, inspect,
// verify, route, apply, export, export-gguf). Registered on the wcodec command line by
// add_cawsf_commands; the returned function runs the chosen command after
// parsing (returns -1 when `cawsf` was not chosen).
// Thread-safety: called from main only.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

std::function<int()> add_cawsf_commands(CLI::App& app);
