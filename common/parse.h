/* parse.h - strict number and list parsing, libc only (the SPANK plugin links it).
 *
 * Every number hetpipe reads (command-line options, HETPIPE_* variables, plugstack.conf
 * arguments, INI values, binding files) goes through these, so that one rule holds
 * everywhere: the whole string must be the number. Integers are decimal with an optional
 * '-' (no '+', no blanks, no "0x", "08" is 8); reals are what strtod reads, but no blanks,
 * no hexadecimal, no inf or nan.
 */
#ifndef HP_PARSE_H
#define HP_PARSE_H

#include <stddef.h>

/* 0, -HP_EINVAL (not a number) or -HP_ERANGE (outside [min, max]); *out set only on success. */
int hp_parse_long(const char *s, long min, long max, long *out);
int hp_parse_double(const char *s, double min, double max, double *out);

/* Comma-separated lists of device indices ("0,1,3"), as Slurm writes SLURM_STEP_GPUS and
 * CUDA_VISIBLE_DEVICES. The position of index `dev` in `list`, or -1. */
int hp_list_find(const char *list, long dev);

/* Entry `pos` (from 0) of `list` into buf (size n); 0, or -1 when there is none or it does
 * not fit. */
int hp_list_entry(const char *list, int pos, char *buf, size_t n);

#endif
