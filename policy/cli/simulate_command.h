// simulate_command.h: the `gswapctl simulate` subcommand, provided by policy/ and registered by
// gswapctl's main. It needs no daemon.
#pragma once

namespace CLI {
class App;
}

namespace gswap::policy::cli {

// Adds `simulate --trace F --budget B --policy P [--json]` to the command line.
void add_simulate_command(CLI::App& app);

}  // namespace gswap::policy::cli
