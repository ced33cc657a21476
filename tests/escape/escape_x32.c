/* escape_x32: x32-ABI getpid (39 | __X32_SYSCALL_BIT) through a raw `syscall`
 * instruction, to slip past filters that check only x86-64 numbers. ESCAPED if
 * it returned our pid; BLOCKED on EPERM/EACCES; INCONCLUSIVE on ENOSYS (no x32 in
 * this kernel). A seccomp kill (SIGSYS) ends the process, as the runner expects. */
#include "escape.h"

#define X32_SYSCALL_BIT 0x40000000L

int main(void)
{
	long ret;

	alarm(20);
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(X32_SYSCALL_BIT | 39)
			 : "rcx", "r11", "memory");
	if (ret == (long)getpid())
		verdict(ESCAPED, "x32 getpid (nr 0x40000027): returned our pid %ld", ret);
	if (ret < 0 && ret > -4096) {
		int e = (int)-ret;

		if (e == ENOSYS)
			verdict(INCONCLUSIVE, "x32 getpid (nr 0x40000027): %s (kernel without x32 support?)",
				strerror(e));
		verdict(e == EPERM || e == EACCES ? BLOCKED : INCONCLUSIVE,
			"x32 getpid (nr 0x40000027): %s", strerror(e));
	}
	verdict(INCONCLUSIVE, "x32 getpid (nr 0x40000027): returned %ld, not our pid", ret);
}
