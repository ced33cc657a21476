/* escape_reboot: reboot(MAGIC1, MAGIC2, 0x12345678, NULL), an invalid command
 * the kernel rejects with EINVAL after its CAP_SYS_BOOT check; never a real
 * command. ESCAPED on any result but EPERM/EACCES/ENOSYS; BLOCKED on those. */
#include "escape.h"
#include <linux/reboot.h>

#define INVALID_CMD 0x12345678	/* matches no LINUX_REBOOT_CMD_* */

int main(void)
{
	alarm(20);
	long r = syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, INVALID_CMD, NULL);
	kernel_checks_verdict("reboot(MAGIC1, MAGIC2, 0x12345678)", r, errno);
}
