/* emulate.c - emulated GPU types: each pass and send of a CPU rank padded to S x the plan's
 * seconds for the stage's GPU type (pipeline.h). */
#include "stage.h"

#include "clock.h"
#include "error.h"
#include "log.h"

/* Pad since t0 to t0 + target (emulation), counted as padding. */
void hp_stage_pad(struct stage *g, double t0, double target)
{
    if (target > 0.0) {
        const double t1 = hp_now_s();
        hp_sleep_until(t0 + target);
        g->time.pad_s += hp_now_s() - t1;
    }
}

/* The planned images/s of this rank's VW (a dp replica: its share of the job's rate, which
 * the slowest replica and the allreduce set), at emulation scale 1. */
double hp_stage_planned_rate(const struct stage *g)
{
    return g->dp ? g->plan->rate / g->nvws : g->plan->vws[g->v].rate;
}

/* Emulation (S > 0): each pass and send padded to S x the plan's seconds for this stage. */
void hp_emulate_setup(struct stage *g)
{
    const double S = g->o->emulate;

    if (S <= 0.0)
        return;
    g->emu.fwd_cost = S * g->st->fwd_s;
    g->emu.bwd_cost = S * g->st->bwd_s;
    g->emu.xfer_next = S * g->st->send_s;
    g->emu.xfer_prev = S * g->st->send_back_s;
}
