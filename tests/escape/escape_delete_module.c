/* escape_delete_module: delete_module("nonexistent_mod_xyz", O_NONBLOCK).
 * ESCAPED on any result but EPERM/EACCES/ENOSYS (ENOENT = the kernel looked the
 * module up); BLOCKED on those. */
#include "escape.h"

int main(void)
{
	alarm(20);
	long r = syscall(SYS_delete_module, "nonexistent_mod_xyz", (unsigned)O_NONBLOCK);
	kernel_checks_verdict("delete_module(nonexistent_mod_xyz, O_NONBLOCK)", r, errno);
}
