// flightrec probe: which kernel features really load here.
#include <iomanip>
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "probe/features.h"

namespace flightrec::cli {

int cmd_probe(const Args& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help");
  po::variables_map vm;
  if (!parse_options(args, desc,
                     "usage: flightrec probe\n\nLoads tiny BPF programs and maps to find what this "
                     "kernel allows;\nexit 0 when everything recording needs is there, 1 otherwise.",
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
  return ok ? 0 : 1;
}

}  // namespace flightrec::cli
