/* escape_kexec: kexec_load with 17 segments (> KEXEC_SEGMENT_MAX) and no buffer:
 * the kernel refuses it with EINVAL right after its CAP_SYS_BOOT/lockdown checks
 * (0 segments would unload a loaded image, so it is not used). ESCAPED on any
 * result but EPERM/EACCES/ENOSYS; BLOCKED on those. */
#include "escape.h"
#include <linux/kexec.h>

int main(void)
{
	alarm(20);
	long r = syscall(SYS_kexec_load, 0UL, 17UL, NULL, (unsigned long)KEXEC_ARCH_DEFAULT);
	kernel_checks_verdict("kexec_load(0, 17, NULL, KEXEC_ARCH_DEFAULT)", r, errno);
}
