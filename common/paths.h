/* paths.h - where hetpipe finds its data files (models, clusters) by name. */
#ifndef HP_PATHS_H
#define HP_PATHS_H

#include "options.h"

#include <stddef.h>

/* The file of data NAME of `kind` ("models", "clusters"): NAME itself when it is a path (it
 * contains '/' or ends in .ini); else NAME.ini in the directory of variable `env` (a TEXT
 * row of the options table: HP_OPT_MODELS, HP_OPT_CLUSTERS), ./etc/KIND, next to the executable
 * (../etc/KIND, ../share/hetpipe/KIND) and HP_DATADIR/KIND, the first readable one. Written
 * into buf (size n); 0, or -HP_ENOTFOUND (not logged: the caller names the kind). */
int hp_path_find(const char *kind, enum hp_opt env, const char *name, char *buf, size_t n);

/* 1 if NAME is a path rather than a name (it contains '/' or ends in .ini). */
int hp_path_is_file(const char *name);

#endif
