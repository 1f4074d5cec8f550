/* stash.h - weight stashing: a minibatch's backward pass on a stage uses exactly the weights
 * its forward pass used.
 *
 * A stage's weights change after every backward pass (its SGD update) and at WSP's gate (the
 * rebase on pulled global weights, wsp.h). Before either change, the current weights are
 * copied into a stash buffer if a minibatch between its forward and backward passes ran
 * forward on them (one copy shared by all such minibatches), and those minibatches' backward
 * passes read the stash. A stage that keeps w minibatches in flight needs at most w - 1
 * stashed versions (the planner's memory model counts them). Versions count the changes: a
 * forward pass records the version it ran on, so the weight log (--weight-log) can show that
 * forward and backward agree.
 *
 * Minibatch j is in slot j mod w (schedule.h). The buffers live on the stage's backend.
 */
#ifndef HP_STASH_H
#define HP_STASH_H

#include "backend.h"

#include <stddef.h>

struct hp_stash;

/* Stashing for a stage of n parameters with w >= 1 slots: w - 1 device buffers. off: never
 * stash (--no-stash, a debugging aid: backward passes then use the current weights). 0, or a
 * negative code (*out untouched). */
int hp_stash_create(struct hp_backend *be, size_t n, int w, int off, struct hp_stash **out);
void hp_stash_destroy(struct hp_stash *st);

/* The minibatch in `slot` runs forward on the current weights. */
void hp_stash_forward(struct hp_stash *st, int slot);

/* The current weights `params` (device, n floats) are about to change: every minibatch of
 * [first, end) still on them gets them stashed, and the version advances. 0, or a negative
 * code (-HP_EINVAL, logged, if no buffer is free: more minibatches in flight than slots). */
int hp_stash_change(struct hp_stash *st, const float *params, long first, long end);

/* The weights the backward pass of `slot` must read: a stash buffer, or NULL for the current
 * weights; *version: theirs. */
const float *hp_stash_weights(const struct hp_stash *st, int slot, long *version);

/* The version of the current weights, and the version `slot`'s forward pass ran on. */
long hp_stash_version(const struct hp_stash *st);
long hp_stash_forward_version(const struct hp_stash *st, int slot);

#endif
