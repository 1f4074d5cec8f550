/* infile.h - opening a file for reading that a user or another process may have put anything
 * at (libc only: the SPANK plugin links it through binding.c).
 *
 * Every file hetpipe reads is opened through hp_infile_open: without blocking (O_NONBLOCK: a
 * FIFO without a writer would block a plain open forever), then fstat()ed, and used only if it
 * is a regular file (a FIFO, a device, a directory or a socket is refused; with
 * HP_INFILE_NOFOLLOW a symbolic link too, for files that hetpipe itself wrote: a checkpoint's,
 * the run directory's). The descriptor is then put back into blocking mode. The check is made
 * on the descriptor that is read, so nothing can be swapped in between.
 */
#ifndef HP_INFILE_H
#define HP_INFILE_H

#include <stdio.h>
#include <sys/stat.h>

#define HP_INFILE_NOFOLLOW 1 /* a symbolic link at the path is refused, not followed */

/* Open `path` (relative to directory descriptor dirfd; AT_FDCWD for the working directory)
 * for reading. The descriptor (>= 0, close-on-exec), or -errno, or -HP_ENOTREG when it is
 * not a regular file (*st then says what it is: S_IFLNK for a refused link). *st (may be
 * NULL) is filled on success too. */
int hp_infile_openat(int dirfd, const char *path, int flags, struct stat *st);
int hp_infile_open(const char *path, int flags, struct stat *st);

/* The same as a stdio stream ("r"); NULL with *err the code (err and st may be NULL). */
FILE *hp_infile_fopen(const char *path, int flags, struct stat *st, int *err);

/* Why a file could not be opened, for a message: "it is a FIFO, not a regular file" for
 * -HP_ENOTREG (the kind from st), else the code's hp_strerror(). Static text; never NULL. */
const char *hp_infile_why(int err, const struct stat *st);

/* What kind of file st is: "a regular file", "a FIFO", "a directory", ... Never NULL. */
const char *hp_infile_kind(const struct stat *st);

#endif
