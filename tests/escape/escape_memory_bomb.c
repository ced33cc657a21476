/* escape_memory_bomb: malloc and touch (memset) 3 GiB in 64 MiB chunks.
 * ESCAPED if all of it was touched; BLOCKED if malloc fails (an OOM kill is a
 * block too, seen by the runner as the signal). */
#include "escape.h"

#define CHUNK (64UL << 20)
#define CHUNKS 48	/* 48 * 64 MiB = 3 GiB */

static void on_alarm(int sig)
{
	(void)sig;
	signal_verdict(INCONCLUSIVE, "memset: still touching memory after 20 s");
}

int main(void)
{
	static char *chunks[CHUNKS];

	signal(SIGALRM, on_alarm);
	alarm(20);
	for (int i = 0; i < CHUNKS; i++) {
		chunks[i] = malloc(CHUNK);
		if (chunks[i] == NULL) {
			int e = errno;

			for (int j = 0; j < i; j++)
				free(chunks[j]);
			verdict(BLOCKED, "malloc(64 MiB) #%d (after %lu MiB): %s", i + 1,
				(unsigned long)i * (CHUNK >> 20), strerror(e));
		}
		memset(chunks[i], 0xA5, CHUNK);
	}
	for (int i = 0; i < CHUNKS; i++)
		free(chunks[i]);
	verdict(ESCAPED, "malloc+memset: touched %lu MiB", (unsigned long)CHUNKS * (CHUNK >> 20));
}
