/* path_race DIR N: opens DIR/a or DIR/b N times through one path buffer
 * while a second thread keeps flipping the buffer's last byte between 'a'
 * and 'b' (the forged-path race: the kernel resolves one name, user memory
 * says the other by the time a tracer reads it). Prints, per open, the
 * first byte of the file it really opened, then a newline. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[4096];
static size_t last;
static atomic_int stop;

static void *flip(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		__atomic_store_n(&path[last], 'b', __ATOMIC_RELAXED);
		__atomic_store_n(&path[last], 'a', __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3 || strlen(argv[1]) + 3 >= sizeof(path)) {
		fprintf(stderr, "usage: path_race DIR N\n");
		return 2;
	}
	int n = atoi(argv[2]);
	snprintf(path, sizeof(path), "%s/a", argv[1]);
	last = strlen(path) - 1;
	pthread_t t;
	if (pthread_create(&t, NULL, flip, NULL) != 0)
		return 1;
	char *seen = calloc((size_t)n + 2, 1);
	for (int i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || read(fd, &seen[i], 1) != 1)
			seen[i] = '?';
		if (fd >= 0)
			close(fd);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	printf("%s\n", seen);
	return 0;
}
