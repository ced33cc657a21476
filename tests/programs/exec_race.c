/* exec_race PATH_A PATH_B N: calls execve() through one path buffer while a
 * second thread keeps rewriting it between PATH_A and PATH_B (same length):
 * the TOCTOU race against a supervisor that decides on the path it read
 * from this process's memory. The first execve that succeeds replaces this
 * program (the new one says which it is); after N failures it prints
 * "none ran". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "path_flip.h"

int main(int argc, char **argv)
{
	if (argc != 4 || strlen(argv[1]) != strlen(argv[2]) || strlen(argv[1]) >= sizeof(flip_path)) {
		fprintf(stderr, "usage: exec_race PATH_A PATH_B N (paths of one length)\n");
		return 2;
	}
	if (flip_start(argv[1], argv[2]) != 0)
		return 1;
	char *args[] = {flip_path, NULL};
	for (int i = 0, n = atoi(argv[3]); i < n; i++)
		execve(flip_path, args, NULL);
	printf("none ran\n");
	return 0;
}
