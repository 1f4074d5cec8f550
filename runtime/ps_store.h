/* ps_store.h - what a parameter-server shard holds and the rules it applies to it (ps.h has
 * the protocol): the global weights of the units the plan gives the shard, and for every VW
 * and unit the waves that VW has pushed of it (its clock of the unit).
 *
 * A push of wave c from a stage is applied only if c is the next wave of every unit of the
 * stage held here; it adds the stage's update (the optimizer state stays on the workers) and
 * advances those clocks to c + 1. A pull with thresholds t[x] is answered once every VW x has
 * pushed at least t[x] waves of every unit of the stage held here. Units without parameters
 * are held by nobody (nothing to synchronise). Pure: no messages, no clock.
 */
#ifndef HP_PS_STORE_H
#define HP_PS_STORE_H

#include "model.h"
#include "plan.h"

#include <stddef.h>
#include <stdint.h>

struct hp_ps_store;

/* The store of shard `index` of plan p for `model`: its units' weights initialised from the
 * plan's seed exactly as every worker initialises its stage (net.h), clocks 0. 0, or a
 * negative code (*out untouched). */
int hp_ps_store_create(const struct hp_plan *p, const struct hp_model *model, int index,
                       struct hp_ps_store **out);
void hp_ps_store_destroy(struct hp_ps_store *st);

/* Whether unit u is held here; unit u's global weights (NULL when not held); VW x's clock of
 * unit u (held). */
int hp_ps_store_holds(const struct hp_ps_store *st, int u);
float *hp_ps_store_unit(struct hp_ps_store *st, int u);
int64_t *hp_ps_store_clock(struct hp_ps_store *st, int x, int u);

/* Floats of units [u0, u1) held here (a stage's share of this shard). */
size_t hp_ps_store_floats(const struct hp_ps_store *st, int u0, int u1);

/* Apply VW v's push of wave `wave` for units [u0, u1): `delta` holds the updates of the units
 * held here, in unit order. 0, or -HP_EPROTOCOL with why (size n) when `wave` is not the next
 * wave of every such unit (nothing is applied then). */
int hp_ps_store_apply(struct hp_ps_store *st, int v, int u0, int u1, int64_t wave,
                      const float *delta, char *why, size_t n);

/* Whether VW x has pushed thr[x] waves of every unit of [u0, u1) held here, for every x. */
int hp_ps_store_ready(const struct hp_ps_store *st, int u0, int u1, const int64_t *thr);

/* What the weights of units [u0, u1) held here hold: per VW x the smallest and largest clock
 * over them in mm[2x], mm[2x + 1] (mm: 2 nvws entries); returns the global clock (the
 * smallest over every VW). */
int64_t hp_ps_store_view(const struct hp_ps_store *st, int u0, int u1, int64_t *mm);

/* The global weights of units [u0, u1) held here, packed in unit order into out. */
void hp_ps_store_pack(const struct hp_ps_store *st, int u0, int u1, float *out);

/* All the weights held here, in unit order (floats: hp_ps_store_floats(st, 0, nunits)). */
const float *hp_ps_store_weights(const struct hp_ps_store *st);

#endif
