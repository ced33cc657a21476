/* escape_int80: i386-ABI getpid (eax=20) through `int $0x80` from 64-bit code,
 * to slip past filters that check only x86-64 numbers. ESCAPED if it returned our
 * pid; BLOCKED on EPERM/EACCES/ENOSYS; INCONCLUSIVE if the kernel has no ia32
 * emulation (the instruction faults with SIGSEGV). A SIGSYS kill ends the process. */
#include "escape.h"

static void on_segv(int sig)
{
	(void)sig;
	signal_verdict(INCONCLUSIVE, "int $0x80: SIGSEGV (no ia32 emulation in this kernel)");
}

int main(void)
{
	long ret;

	alarm(20);
	signal(SIGSEGV, on_segv);
	__asm__ volatile("int $0x80"
			 : "=a"(ret)
			 : "a"(20L)
			 : "r8", "r9", "r10", "r11", "memory");
	if (ret == (long)getpid())
		verdict(ESCAPED, "int $0x80 getpid (i386 nr 20): returned our pid %ld", ret);
	if (ret < 0 && ret > -4096) {
		int e = (int)-ret;

		verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "int $0x80 getpid (i386 nr 20): %s",
			strerror(e));
	}
	verdict(INCONCLUSIVE, "int $0x80 getpid (i386 nr 20): returned %ld, not our pid", ret);
}
