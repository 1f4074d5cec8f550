/* rundir.h - a job's private directory (mode 0700): where hetpipe run and hetpipe launch put
 * the plan, the address files, the binding and the logs. The one way both make it.
 */
#ifndef HP_RUNDIR_H
#define HP_RUNDIR_H

#include <stddef.h>

/* Make the run directory and write its path into out (size n):
 * - `given` (--run-dir): created if missing; one that exists must be a directory of this user
 *   and not a symbolic link; its mode is set to 0700;
 * - else a new directory under `base`: `name` with "XXXXXX" in it is made unique by mkdtemp
 *   ("hetpipe-run.XXXXXX"); any other name is tried as name, name.1, name.2, ... and the first
 *   that does not exist is created ("hetpipe-42").
 * `cmd` prefixes the messages. 0, or -1 (logged; out is then ""). */
int hp_rundir_create(const char *cmd, const char *given, const char *base, const char *name,
                     char *out, size_t n);

/* A private subdirectory dir/sub (created, mode 0700; an existing one is kept if it passes the
 * same checks); its path into out (size n). 0, or -1 (logged). */
int hp_rundir_sub(const char *cmd, const char *dir, const char *sub, char *out, size_t n);

#endif
