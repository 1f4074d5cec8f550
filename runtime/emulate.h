/* emulate.h - emulated GPU types: a CPU rank that stands for GPU type T pads each pass and
 * each send of its stage to S x the plan's seconds for them on T (the plan carries them per
 * stage: the planner's cost model, or the profile it was made with), by sleeping; S is
 * --emulate (0: off). So heterogeneity is real in wall-clock time on a machine without GPUs.
 * The worker's loop (worker.c) pads; a rank never builds a cost model.
 */
#ifndef HP_EMULATE_H
#define HP_EMULATE_H

#include "options.h"
#include "plan.h"

#include <stddef.h>

/* Emulated seconds (S x the plan's) of one pass or send of a stage; 0: not padded. */
struct hp_emu {
    double fwd, bwd, send_next, send_prev, allreduce;
    double pad_s; /* seconds slept so far */
};

/* The targets of stage st of plan p at scale S (<= 0: all 0). */
void hp_emu_init(struct hp_emu *e, const struct hp_plan *p, const struct hp_stage_plan *st,
                 double S);

/* Sleep until t0 + target (target > 0), counting the sleep in e->pad_s. */
void hp_emu_pad(struct hp_emu *e, double t0, double target);

/* The deadline of a rank's waits for other VWs, job points and checkpoints (milliseconds):
 * --timeout plus S_eff x the plan's longest legitimate wait (emulate.c). */
int hp_plan_wait_ms(const struct hp_plan *p, const struct hp_options *o, size_t model_floats);

#endif
