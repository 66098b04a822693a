// policy_sim.cpp: a stand-alone front end for `simulate`, for using and testing it without
// gswapctl. Errors end with a message on stderr and exit status 1.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "policy/cli/simulate_command.h"

int main(int argc, char** argv) {
  CLI::App app{"policy_sim: plan and simulate a gswap trace under a memory budget"};
  app.require_subcommand(1);
  gswap::policy::cli::add_simulate_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "policy_sim: " << e.what() << "\n";
    return 1;
  }
  return gswap::policy::cli::checked_stdout("policy_sim", 0);
}
