#pragma once
// The policy's seccomp rules as a libseccomp filter for x86-64. Built in
// the parent (it allocates), loaded by the child as its last step before
// exec. Other ABIs (i386 via int 0x80, x32) kill the process.
#include "policy/policy.h"

namespace flightrec::sandbox {

class SeccompFilter {
 public:
  explicit SeccompFilter(const policy::Seccomp& s);  // throws Error naming a bad rule
  SeccompFilter(const SeccompFilter&) = delete;
  SeccompFilter& operator=(const SeccompFilter&) = delete;
  ~SeccompFilter();
  int load() const;  // 0 or an errno; async-signal-safe enough for after fork
 private:
  void* ctx_ = nullptr;
};

}  // namespace flightrec::sandbox
