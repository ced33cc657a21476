#pragma once
// Pieces run and watch share: blocking termination signals into a
// signalfd, and the capture options.
#include <csignal>

namespace flightrec::cli {

// Blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT and returns a signalfd for them.
int block_termination_signals();
// Reads one signal number from the signalfd (0 if none).
int read_signal(int sigfd);

}  // namespace flightrec::cli
