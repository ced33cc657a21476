// flightrec probe: which kernel features really load here.
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/system.h"
#include "probe/capture.h"
#include "probe/features.h"
#include "sandbox/cgroup.h"

namespace flightrec::cli {

int cmd_probe(const Args& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help");
  po::variables_map vm;
  if (!parse_options(args, desc,
                     "usage: flightrec probe\n\nLoads tiny BPF programs and maps to find what this "
                     "kernel allows, then\nflightrec's own programs, hook by hook (what a session "
                     "would attach here);\nexit 0 when everything recording needs is there, 1 otherwise.",
                     vm))
    return 0;
  bool ok = true;
  for (const auto& f : probe::probe_features()) {
    std::cout << std::left << std::setw(48) << f.name << (f.available ? "yes" : "no ");
    if (!f.detail.empty()) std::cout << "  " << f.detail;
    if (f.required && !f.available) {
      std::cout << "  (required)";
      ok = false;
    }
    std::cout << "\n";
  }
  if (!ok) return 1;
  // flightrec's own programs, loaded as a session would (into a throwaway
  // cgroup): each hook attached, or refused alone and left to the tracepoints.
  try {
    sandbox::Cgroup cgroup = sandbox::Cgroup::create("probe-" + std::to_string(getpid()));
    probe::CaptureOptions copts;
    copts.cgroup_fds = {cgroup.fd()};
    copts.ring_bytes = 64u << 10;
    {
      probe::Capture capture(copts, [](const void*, size_t) {});
      for (const auto& section : capture.attached())
        std::cout << std::left << std::setw(48) << ("program " + section) << "yes\n";
      for (const auto& section : capture.refused())
        std::cout << std::left << std::setw(48) << ("program " + section)
                  << "no   refused by this kernel: the syscall tracepoints see these calls\n";
    }
    cgroup.remove_if_owned();
  } catch (const Error& e) {
    std::cout << std::left << std::setw(48) << "flightrec's programs" << "no   " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace flightrec::cli
