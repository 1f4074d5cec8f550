/* output.h - results written without harm to what is there.
 *
 * A result goes to a new file in its target's directory and is renamed over the target only
 * when the target is a regular file or nothing (keeping the old file's mode), so a reader
 * never sees half a file and a failed write loses nothing. A device or FIFO at the target
 * (/dev/null, /dev/full, a pipe to a reader) is written in place, never replaced by a file; a
 * directory is refused; a symbolic link is followed to what it names and stays a link. */
#ifndef HP_OUTPUT_H
#define HP_OUTPUT_H

#include <stdio.h>
#include <sys/types.h>

/* Open `path` for writing a result described as `what` ("plan", "metrics", ...; for
 * messages). A new file gets perms less the umask (0666 for most; 0600 for one that holds a
 * secret); a replaced one keeps its mode, within perms. NULL after an error message naming
 * the path and the reason. */
FILE *hp_out_open(const char *path, const char *what, mode_t perms);

/* Finish a file hp_out_open gave: flush, sync and rename into place when ok, else discard
 * it (the target untouched). 0, or a negative errno after an error message. f may be NULL. */
int hp_out_close(FILE *f, int ok);

#endif
