/* gpt_cpu.c - hetpipe's side of the GPT CPU benchmark (tests/bench/gpt_cpu/run; PyTorch's side
 * is tests/bench/gpt_cpu/torch_gpt.py): a text model (a name or an .ini path) as one net on the
 * CPU backend, one BLAS thread, batch B, AdamW; STEPS timed training steps (forward,
 * hp_net_loss_tokens, backward, hp_net_adamw) on random tokens and labels after one untimed
 * step. Prints key=value lines:
 *   s_per_step     the median of the timed steps' CPU times (the process's: what other
 *                  tenants of a shared machine cannot stretch)
 *   wall_s_per_step the median of their wall times
 *   base_kib       the resident set before the model is loaded (VmRSS)
 *   peak_kib       the process's peak resident set at the end (VmHWM)
 *   net_bytes      the net's one allocation (hp_net_memory.total), and its activations
 * and, with `profile`, the timed steps' seconds per op type, forward and backward (stderr).
 * Usage: bench_gpt_cpu MODEL BATCH [STEPS [profile]]
 */
#include "backend.h"
#include "clock.h"
#include "model.h"
#include "net.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void print_profile(const struct hp_net_profile *p, int steps)
{
    for (int t = 0; t < HP_OP_NTYPES; t++)
        if (p->fwd_s[t] + p->bwd_s[t] > 0)
            fprintf(stderr, "profile: %-10s forward %8.4f s, backward %8.4f s per step\n",
                    hp_op_name((enum hp_op_type)t), p->fwd_s[t] / steps, p->bwd_s[t] / steps);
}

static double cpu_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One training step on fresh random tokens and labels (seeded by the step). */
static int train_step(struct hp_net *net, const struct hp_model *m, int batch, int32_t *lab,
                      long step, double *loss)
{
    const int T = hp_model_positions(m), V = m->classes, n = batch * T;
    const struct hp_adamw_desc ad = {
        .lr = 3e-4f, .wd = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .step = step};
    float *x = hp_net_input(net, 0);
    int correct, rc;

    for (int i = 0; i < n; i++) {
        x[i] = (float)(hp_rng_u64(2 * (uint64_t)step, (uint64_t)i) % (uint64_t)V);
        lab[i] = (int32_t)(hp_rng_u64(2 * (uint64_t)step + 1, (uint64_t)i) % (uint64_t)V);
    }
    if ((rc = hp_net_forward(net, 0, 1, (uint64_t)step)) ||
        (rc = hp_net_loss_tokens(net, 0, lab, batch, 1, loss, &correct)) ||
        (rc = hp_net_backward(net, 0)) || (rc = hp_net_adamw(net, &ad)))
        return rc;
    *loss /= n;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_gpt_cpu MODEL BATCH [STEPS]\n");
        return 2;
    }
    const int batch = atoi(argv[2]), steps = argc > 3 ? atoi(argv[3]) : 5;
    struct hp_backend *be = NULL;
    struct hp_model *m = NULL;
    struct hp_net *net = NULL;
    struct hp_net_memory mem;
    const struct hp_net_config cfg = {.batch = batch, .nslots = 1, .optimizer = HP_OPTIMIZER_ADAMW};
    size_t base = 0, now = 0, peak = 0;
    double loss = 0.0, *t = calloc(steps > 0 ? 2 * (size_t)steps : 1, sizeof(double));
    int32_t *lab = NULL;
    struct hp_net_profile prof;
    const int profile = argc > 4 && strcmp(argv[4], "profile") == 0;

    hp_backend_cpu_set_threads(1);
    if (batch <= 0 || steps <= 0 || !t || hp_backend_cpu_create(&be) ||
        be->ops->memory_used(be, &base, &peak) || hp_model_load(argv[1], &m) ||
        !(lab = malloc((size_t)batch * hp_model_positions(m) * sizeof(int32_t))) ||
        hp_net_create(be, m, 0, m->nunits, &cfg, &net) || hp_net_init_params(net, 1)) {
        fprintf(stderr, "bench_gpt_cpu: cannot set up %s at batch %s\n", argv[1], argv[2]);
        return 1;
    }
    for (int s = 0; s <= steps; s++) {
        const double t0 = hp_now_s(), c0 = cpu_now_s();
        if (s == 1 && profile) {
            memset(&prof, 0, sizeof(prof));
            hp_net_set_profile(net, &prof);
        }
        if (train_step(net, m, batch, lab, s + 1, &loss)) {
            fprintf(stderr, "bench_gpt_cpu: step %d failed\n", s);
            return 1;
        }
        if (s > 0) {
            t[s - 1] = cpu_now_s() - c0;
            t[steps + s - 1] = hp_now_s() - t0;
        }
        fprintf(stderr, "bench_gpt_cpu: step %d: %.3f s, loss %.4f\n", s, hp_now_s() - t0, loss);
    }
    if (profile)
        print_profile(&prof, steps);
    qsort(t, (size_t)steps, sizeof(double), cmp_double);
    qsort(t + steps, (size_t)steps, sizeof(double), cmp_double);
    hp_net_memory(net, &mem);
    if (be->ops->memory_used(be, &now, &peak))
        return 1;
    printf("model=%s\nparams=%zu\nbatch=%d\ncontext=%d\n", m->name, hp_net_nparams(net), batch,
           hp_model_positions(m));
    printf("s_per_step=%.4f\nwall_s_per_step=%.4f\nloss=%.4f\n", t[steps / 2], t[steps + steps / 2],
           loss);
    printf("base_kib=%zu\npeak_kib=%zu\nnet_bytes=%zu\nnet_activation_bytes=%zu\n", base / 1024,
           peak / 1024, mem.total, mem.activations);
    free(t);
    free(lab);
    hp_net_destroy(net);
    hp_backend_destroy(be);
    hp_model_destroy(m);
    return 0;
}
