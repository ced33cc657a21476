#pragma once
// Termination requests as events: a session blocks SIGINT, SIGTERM, SIGHUP
// and SIGQUIT before it starts any thread (so every thread inherits the
// mask) and reads them from a signalfd in its event loop.
namespace flightrec::session {

// Blocks the four signals and returns a signalfd for them. Throws Error.
int block_termination_signals();
// Reads one signal number from the signalfd (0 if none).
int read_signal(int sigfd);

}  // namespace flightrec::session
