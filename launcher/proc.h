/* proc.h - other programs and files, without a shell: paths and arguments may hold any
 * character, so nothing here builds a command line for /bin/sh.
 */
#ifndef HP_PROC_H
#define HP_PROC_H

#include <stddef.h>
#include <stdio.h>

struct hp_proc_result {
    char *out;  /* its stdout and stderr, NUL-terminated, at most max_out bytes (owned: free) */
    int status; /* exit status; 124 past the deadline (as coreutils' timeout), 127 not
                   started, -1 killed by a signal */
};

/* Run argv[0] (a path, or a name looked up in PATH) with argv (NULL-terminated), stdin from
 * /dev/null, stdout and stderr into r->out, in a process group of its own; after timeout_s
 * seconds the group gets SIGTERM and 2 s later SIGKILL. Every wait has that deadline. 0 (see
 * r->status), or a negative code when it could not be run at all (logged). */
int hp_proc_run(const char *const *argv, double timeout_s, size_t max_out,
                struct hp_proc_result *r);

/* The hetpipe-rank program next to this hetpipe (or $HETPIPE_RANK_BIN) into buf (size n); 0,
 * or -1 with an error naming `cmd` when it is not executable. */
int hp_rank_binary(const char *cmd, char *buf, size_t n);

/* Remove directory dir and everything below it, never following a symbolic link (only the
 * link goes). 0, or -errno (logged, naming the path that could not go). */
int hp_remove_tree(const char *dir);

/* Copy the last `lines` lines of the file at path to f (nothing when it cannot be read). */
void hp_tail_file(const char *path, int lines, FILE *f);

#endif
