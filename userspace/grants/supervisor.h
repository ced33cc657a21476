#pragma once
// The grant supervisor: a process of its own beside the sandbox that holds
// the seccomp listener of the session's asked calls (policy ask:) and the
// grant socket. An asked call waits until a grant covers it or the ask
// times out (then it fails); a grant comes from the session's owner or
// root over the socket. What it decides goes to the recorder as JSON
// lines on events_fd (see session/grant_log.h), one per ask, grant, use,
// expiry, revocation, denial and refused client.
//
// Answers: a syscall grant lets the call go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE
// is safe there: the decision rests on the call's number alone). A connect
// is decided on the address read from the thread's memory, which it could
// change before the kernel copies it: so the call goes on with a ticket
// for that thread and address in a BPF map, and the cgroup connect program
// lets it through only if the kernel's copy matches (bpf/egress.bpf.c).
// An exec the same way: a ticket for the thread and the file's path, which
// lsm/file_open takes only for the path the kernel resolved (bpf/lsm.bpf.c). A file
// call is resolved as the kernel would for the thread (grants/agent_view.h):
// inside the trees the policy lets it write, it goes on and Landlock
// decides as always; under a granted directory the supervisor does it
// itself on the resolved directory's descriptor (an open's file is handed
// over with SECCOMP_IOCTL_NOTIF_ADDFD), so no memory the thread can change
// afterwards is used. If the supervisor dies, the kernel fails every asked
// call from then on (ENOSYS): closed, not open.
#include <sys/types.h>

#include <string>
#include <vector>

#include "policy/policy.h"

namespace flightrec::grants {

struct SupervisorSpec {
  int notify_sock = -1;   // the listener arrives here from the sandbox (SCM_RIGHTS)
  int listen_fd = -1;     // the grant socket, listening
  int events_fd = -1;     // JSON lines for the recorder
  pid_t sandbox_init = -1;  // its root and pid namespace are the sandbox's
  uid_t owner = 0;        // may grant, besides root
  std::vector<std::string> writable;  // trees the policy lets the session write (inside paths)
  std::vector<policy::Endpoint> allow;  // the egress allowlist: connects there go on unasked
  int granted_map = -1, tickets_map = -1;  // fr_egress_granted, fr_egress_tickets (ask.connect)
  int named_map = -1;  // fr_egress_named, read-only: addresses allowed names resolved to go on unasked too
  int name_asks_fd = -1;  // the session resolver's lookups that wait for a name grant (grants/name_asks.h)
  // ask.exec: the files and trees that run without a grant (as BPF-LSM's
  // trie has them) and fr_exec_tickets.
  std::vector<std::string> exec_rules;
  int exec_tickets_map = -1;
  int view_gen_map = -1;  // fr_view_gen: what is read of a thread holds while it does (-1: read each time)
  uint64_t timeout_ms = 10'000;
};

// Forks the supervisor (call while the process has one thread); the child
// keeps only the spec's descriptors. Returns its pid.
pid_t start_supervisor(const SupervisorSpec& spec);

}  // namespace flightrec::grants
