#include "session/signals.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "common/error.h"

namespace flightrec::session {

int block_termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) throw Error(errno_message("sigprocmask", errno));
  int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) throw Error(errno_message("signalfd", errno));
  return fd;
}

int read_signal(int sigfd) {
  signalfd_siginfo info{};
  if (read(sigfd, &info, sizeof(info)) != sizeof(info)) return 0;
  return int(info.ssi_signo);
}

}  // namespace flightrec::session
