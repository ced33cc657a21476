/* escape_cpu_spin: burn 30 s of CPU time (CLOCK_PROCESS_CPUTIME_ID) within 55 s
 * of wall time; uses alarm(60). ESCAPED if it got there; BLOCKED on SIGXCPU (a
 * CPU-time limit) or if throttling kept it under 30 s by the deadline. */
#include "escape.h"
#include <time.h>

static void on_xcpu(int sig)
{
	(void)sig;
	signal_verdict(BLOCKED, "CPU time limit reached (SIGXCPU)");
}

static double seconds(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
	volatile unsigned long sink = 0;

	alarm(60);
	signal(SIGXCPU, on_xcpu);
	double cpu0 = seconds(CLOCK_PROCESS_CPUTIME_ID), wall0 = seconds(CLOCK_MONOTONIC);
	for (;;) {
		for (unsigned long i = 0; i < 1000000; i++)
			sink = sink + i;
		double cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
		double wall = seconds(CLOCK_MONOTONIC) - wall0;

		if (cpu >= 30.0)
			verdict(ESCAPED, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID): spun %.1f s of CPU in %.1f s",
				cpu, wall);
		if (wall >= 55.0)
			verdict(BLOCKED, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID): only %.1f s of CPU in %.1f s "
				"(throttled)", cpu, wall);
	}
}
