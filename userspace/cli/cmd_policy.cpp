// flightrec policy show: a policy as flightrec reads it, its `extends:`
// chain resolved (policies/README.md, Extending a policy).
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "policy/policy.h"

namespace flightrec::cli {

int cmd_policy(const Args& all) {
  const char* usage =
      "usage: flightrec policy show NAME|FILE\n"
      "       flightrec policy check NAME|FILE\n\n"
      "show: prints the effective policy as YAML: the file laid over each policy its\n"
      "extends: chain names (a shipped name, or a file relative to the extending\n"
      "file), the chain as a comment first. check: only reads it, printing nothing\n"
      "when it is valid. Exit 0 for a valid policy, 2 with FILE:LINE: KEY: problem\n"
      "for one that is not.";
  po::options_description desc("options");
  std::string action, name;
  desc.add_options()("help,h", "show this help")("action", po::value(&action), "show or check (the first word)")(
      "policy", po::value(&name), "a shipped name or a YAML file (the second word)");
  po::positional_options_description positional;
  positional.add("action", 1).add("policy", 1);
  po::variables_map vm;
  if (!parse_options(all, desc, usage, vm, &positional)) return 0;
  if (action != "show" && action != "check") throw UsageError("flightrec policy takes show or check (see --help)");
  if (name.empty()) throw UsageError("flightrec policy " + action + " needs a policy: a shipped name or a YAML file");
  policy::Policy p;
  try {
    p = policy::load(name);
  } catch (const policy::PolicyError& e) {
    throw UsageError(e.what());
  }
  if (action == "check") return 0;
  std::cout << "# policy " << p.name << " from " << p.source << "\n";
  std::cout << policy::effective_yaml(p);
  return 0;
}

}  // namespace flightrec::cli
