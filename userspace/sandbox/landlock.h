#pragma once
// Landlock for the session's file system rules (readable trees, writable
// trees, executable files) and, where the ABI has it, TCP connect ports,
// abstract UNIX socket and signal scoping. Best effort: what the kernel's
// ABI could enforce is said by describe() and recorded in the genesis entry.
#include <cstdint>
#include <string>
#include <vector>

#include "policy/policy.h"

namespace flightrec::sandbox {

struct LandlockPlan {
  int abi = 0;                           // 0: Landlock unavailable
  std::vector<std::string> read, write, exec;
  std::vector<std::string> write_files;  // single files (devices) to read and write
  bool filesystem = true;                // false (nested_sandboxes): no file system rules, which forbid mounts
  bool restrict_connect = false;         // TCP connect only to connect_ports
  std::vector<uint16_t> connect_ports;

  static LandlockPlan from(const policy::Policy& p, const std::string& work_dir, const std::string& command);
  // Applies the plan to the calling thread; returns 0 or an errno. Runs in
  // the sandboxed child after fork: no exceptions.
  int apply() const;
  std::string describe() const;
};

int landlock_abi();  // 0 when Landlock is not available

}  // namespace flightrec::sandbox
