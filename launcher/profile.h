/* profile.h - measured unit costs (`hetpipe profile`), which override the roofline estimates.
 *
 * A profile database is an INI file:
 *
 *   [profile]
 *   version = 1
 *   type    = titanv        ; the GPU type of the site config the numbers stand for
 *   device  = cuda:0 (NVIDIA TITAN V)   ; what was measured (informational)
 *   batch   = 32            ; minibatch of the measurement; the planner scales times linearly
 *
 *   [unit.SIGNATURE]        ; one per distinct unit, SIGNATURE = kind-CxHxW-HASH
 *   fwd_s  = 0.0123         ; seconds per minibatch, forward
 *   bwd_s  = 0.0246         ; backward
 *   memory = 123456789      ; bytes of a one-unit net (parameters, gradients, momentum,
 *                           ; activations of one minibatch, workspace) on that device
 *
 * The signature depends on the unit's kind, input shape and every op's parameters, not on
 * its name or model, so one profile serves every model made of the same units.
 */
#ifndef HP_PROFILE_H
#define HP_PROFILE_H

#include "cost.h"
#include "layers.h"

#include <stddef.h>

/* The signature of a unit, written into buf (size n >= 64). */
void hp_profile_signature(const struct hp_unit *u, char *buf, size_t n);

/* Apply the profile file at `path` to c: every unit whose signature it holds gets the
 * measured times (scaled from the profile's batch to c->batch) for the profile's type.
 * *applied counts the units. 0, or a negative code (logged: file, section, key). */
int hp_profile_apply(const char *path, struct hp_cost *c, int *applied);

#endif
