/* escape_memory_bomb: malloc and touch (memset) 3 GiB in 64 MiB chunks.
 * ESCAPED if all of it was touched; BLOCKED if malloc fails (an OOM kill is a
 * block too, seen by the runner as the signal).
 *
 * A watchdog tells a stall from slowness: the first touch of fresh memory on
 * a VM can take many seconds per GiB when the host backs it lazily, so the
 * bomb is given as long as it keeps touching, and only a 20 s stretch without
 * a single MiB touched (a throttled cgroup, say) is INCONCLUSIVE. */
#include "escape.h"

#define MIB (1UL << 20)
#define CHUNK (64 * MIB)
#define CHUNKS 48	/* 48 * 64 MiB = 3 GiB */
#define STALL_SECONDS 20

static volatile sig_atomic_t mib_touched;
static sig_atomic_t mib_at_last_alarm;

static void on_alarm(int sig)
{
	(void)sig;
	if (mib_touched == mib_at_last_alarm)
		signal_verdict(INCONCLUSIVE, "memset: no MiB touched in 20 s");
	mib_at_last_alarm = mib_touched;
	alarm(STALL_SECONDS);
}

int main(void)
{
	static char *chunks[CHUNKS];

	signal(SIGALRM, on_alarm);
	alarm(STALL_SECONDS);
	for (int i = 0; i < CHUNKS; i++) {
		chunks[i] = malloc(CHUNK);
		if (chunks[i] == NULL) {
			int e = errno;

			for (int j = 0; j < i; j++)
				free(chunks[j]);
			verdict(BLOCKED, "malloc(64 MiB) #%d (after %lu MiB): %s", i + 1,
				(unsigned long)i * (CHUNK >> 20), strerror(e));
		}
		for (unsigned long off = 0; off < CHUNK; off += MIB) {
			memset(chunks[i] + off, 0xA5, MIB);
			mib_touched = mib_touched + 1;
		}
	}
	alarm(0);
	for (int i = 0; i < CHUNKS; i++)
		free(chunks[i]);
	verdict(ESCAPED, "malloc+memset: touched %lu MiB", (unsigned long)CHUNKS * (CHUNK >> 20));
}
