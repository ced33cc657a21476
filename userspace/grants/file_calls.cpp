#include "grants/file_calls.h"

#include <linux/openat2.h>
#include <sys/syscall.h>

#include <cstdio>  // RENAME_NOREPLACE

namespace flightrec::grants {

bool refused_by_leaf(const FileCall& c, int i, bool exists) {
  using Op = FileCall::Op;
  switch (c.op) {
    case Op::Mkdir: return exists;
    case Op::Open: return exists ? (c.flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL) : !(c.flags & O_CREAT);
    case Op::Unlink: return !exists;
    case Op::Rename: return i == 0 ? !exists : exists && (c.flags & RENAME_NOREPLACE);
  }
  return false;
}

bool file_call(const seccomp_data& d, const AgentView& view, FileCall* c) {
  const auto* a = d.args;
  using Op = FileCall::Op;
  auto one = [&](int dirfd, uint64_t addr) { c->paths[c->count++] = {dirfd, addr}; };
  switch (d.nr) {
    case SYS_open: one(AT_FDCWD, a[0]); c->flags = a[1]; c->mode = a[2]; return true;
    case SYS_creat: one(AT_FDCWD, a[0]); c->flags = O_CREAT | O_WRONLY | O_TRUNC; c->mode = a[1]; return true;
    case SYS_openat: one(int(a[0]), a[1]); c->flags = a[2]; c->mode = a[3]; return true;
    case SYS_openat2: {
      open_how how{};
      // Our copy decides and is what gets used: a later change is moot.
      if (a[3] < sizeof(open_how) || !view.read_memory(a[2], &how, sizeof(how))) return false;
      one(int(a[0]), a[1]);
      c->flags = how.flags;
      c->mode = how.mode;
      c->resolve = how.resolve;
      return true;
    }
    case SYS_mkdir: c->op = Op::Mkdir; one(AT_FDCWD, a[0]); c->mode = a[1]; return true;
    case SYS_mkdirat: c->op = Op::Mkdir; one(int(a[0]), a[1]); c->mode = a[2]; return true;
    case SYS_unlink: c->op = Op::Unlink; one(AT_FDCWD, a[0]); return true;
    case SYS_rmdir: c->op = Op::Unlink; one(AT_FDCWD, a[0]); c->flags = AT_REMOVEDIR; return true;
    case SYS_unlinkat: c->op = Op::Unlink; one(int(a[0]), a[1]); c->flags = a[2] & AT_REMOVEDIR; return true;
    case SYS_rename: c->op = Op::Rename; one(AT_FDCWD, a[0]); one(AT_FDCWD, a[1]); return true;
    case SYS_renameat: c->op = Op::Rename; one(int(a[0]), a[1]); one(int(a[2]), a[3]); return true;
    case SYS_renameat2:
      c->op = Op::Rename; one(int(a[0]), a[1]); one(int(a[2]), a[3]); c->flags = a[4]; return true;
  }
  return false;
}

}  // namespace flightrec::grants
