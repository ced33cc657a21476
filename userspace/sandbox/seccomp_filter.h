#pragma once
// The policy's seccomp rules as a libseccomp filter for x86-64. Built in
// the parent (it allocates), loaded by the child as its last step before
// exec. Other ABIs (i386 via int 0x80, x32) kill the process. Calls the
// policy asks about (ask:) notify a listener: the grant supervisor.
#include "policy/policy.h"

namespace flightrec::sandbox {

class SeccompFilter {
 public:
  // Throws Error naming a bad rule.
  SeccompFilter(const policy::Seccomp& s, const policy::Ask& ask);
  SeccompFilter(const SeccompFilter&) = delete;
  SeccompFilter& operator=(const SeccompFilter&) = delete;
  ~SeccompFilter();
  int load() const;  // 0 or an errno; async-signal-safe enough for after fork
  bool notifies() const { return notifies_; }
  int notify_fd() const;  // after load(): the listener for asked calls (-1: none)
 private:
  void* ctx_ = nullptr;
  bool notifies_ = false;
};

}  // namespace flightrec::sandbox
