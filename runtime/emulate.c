/* emulate.c - emulated GPU types (emulate.h). */
#include "emulate.h"

#include "clock.h"

void hp_emu_init(struct hp_emu *e, const struct hp_plan *p, const struct hp_stage_plan *st,
                 double S)
{
    *e = (struct hp_emu){0};
    if (S <= 0.0)
        return;
    e->fwd = S * st->fwd_s;
    e->bwd = S * st->bwd_s;
    e->send_next = S * st->send_s;
    e->send_prev = S * st->send_back_s;
    e->allreduce = p->grouping == HP_POLICY_DP ? S * p->allreduce_s : 0.0;
}

void hp_emu_pad(struct hp_emu *e, double t0, double target)
{
    if (target > 0.0) {
        const double t1 = hp_now_s();
        hp_sleep_until(t0 + target);
        e->pad_s += hp_now_s() - t1;
    }
}

/* How long (ms) a rank may wait for other VWs or a job point before it calls the silence a failure
 * (worker.h): --timeout plus S_eff x the plan's longest legitimate wait: D + 3 waves of the
 * slowest VW (WSP lets a VW run D + 2 waves ahead; a job point waits for the last to drain),
 * VW 0's pass over the test set (evaluation), and writing a checkpoint of every unit's weights,
 * momentum and statistics at 20 MB/s. S_eff is the emulation scale; without emulation 2 on a
 * GPU (the plan's own device) and 200 on the CPU (a CPU is that much slower than the GPU the
 * plan timed). */
int hp_plan_wait_ms(const struct hp_plan *p, const struct hp_options *o, size_t model_floats)
{
    const double S = o->emulate > 0.0                    ? o->emulate
                     : o->device == HP_DEVICE_CHOICE_CPU ? 200.0
                                                         : 2.0;
    const long test_n = o->test_limit > 0 && o->test_limit < 10000 ? o->test_limit : 10000;
    const long D = p->opts.staleness;
    double wave = 0.0, test = 0.0;

    for (int v = 0; v < p->nvws; v++) {
        double mb = 0.0, fill = 0.0;
        for (int s = 0; s < p->vws[v].nstages; s++) {
            const struct hp_stage_plan *st = &p->vws[v].stages[s];
            const double t = st->compute_s + st->transfer_s;
            mb = t > mb ? t : mb;
            fill += t;
        }
        const double w = (p->vws[v].nm > 0 ? p->vws[v].nm : 1) * mb + fill;
        wave = w > wave ? w : wave;
    }
    for (int s = 0; s < p->vws[0].nstages; s++)
        test += p->vws[0].stages[s].fwd_s + p->vws[0].stages[s].send_s;
    test *= (double)(test_n + p->opts.batch - 1) / p->opts.batch;
    if (p->grouping == HP_POLICY_DP)
        wave += p->allreduce_s;
    const double s =
        o->timeout + S * ((double)(D + 3) * wave + test) + 3.0 * 4.0 * model_floats / 20e6;
    return s < 2e6 ? (int)(s * 1000.0) : 2000000000; /* an int of milliseconds */
}
