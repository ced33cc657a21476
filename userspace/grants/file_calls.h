#pragma once
// The file calls ask.write routes to the grant supervisor
// (policy::write_ask_syscalls()), read as the thread made them: which
// operation, on which one or two paths, with which flags.
#include <fcntl.h>
#include <linux/seccomp.h>

#include <cstdint>

#include "grants/agent_view.h"

namespace flightrec::grants {

// One file call, as the thread asked for it: up to two paths.
struct FileCall {
  struct Path {
    int dirfd = AT_FDCWD;
    uint64_t addr = 0;  // the path, in the thread's memory
  } paths[2];
  int count = 0;
  enum class Op { Open, Mkdir, Unlink, Rename } op = Op::Open;
  uint64_t flags = 0, mode = 0, resolve = 0;
};

// Whether the kernel refuses the call for what stands (or not) at path i
// alone, before any permission check: mkdir of what exists, removing or
// renaming what does not, an open without O_CREAT of a missing file. No
// grant could change that answer, so such calls are not asked about.
bool refused_by_leaf(const FileCall& c, int i, bool exists);

// Reads the call (openat2's open_how from the thread's memory, through
// view); false when it is not one of them or cannot be read.
bool file_call(const seccomp_data& d, const AgentView& view, FileCall* c);

}  // namespace flightrec::grants
