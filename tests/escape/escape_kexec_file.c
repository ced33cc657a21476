/* escape_kexec_file: kexec_file_load(-1, -1, 0, "", 0); past its CAP_SYS_BOOT
 * check the kernel fails reading fd -1 with EBADF, loading nothing. ESCAPED on any
 * result but EPERM/EACCES/ENOSYS; BLOCKED on those. */
#include "escape.h"

#ifndef __NR_kexec_file_load
#define __NR_kexec_file_load 320
#endif

int main(void)
{
	alarm(20);
	long r = syscall(__NR_kexec_file_load, -1, -1, 0UL, "", 0UL);
	kernel_checks_verdict("kexec_file_load(-1, -1, 0, \"\", 0)", r, errno);
}
