/* cmd_profile.c - `hetpipe profile`: measure every distinct unit's forward and backward time
 * and memory on this device, into a profile database for `hetpipe plan --profile` (profile.h).
 */
#include "backend.h"
#include "clock.h"
#include "commands.h"
#include "error.h"
#include "log.h"
#include "output.h"
#include "model.h"
#include "net.h"
#include "profile.h"
#include "rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char synopsis[] =
    "usage: hetpipe profile [options]\n"
    "Time forward and backward of every distinct unit of the model (one-unit nets on random\n"
    "data, the median of --steps after a warm-up) and its memory, and write a profile database\n"
    "for 'hetpipe plan --profile FILE'.\n";

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Whether unit u's signature is that of an earlier unit (measured once). */
static int seen_before(const struct hp_model *m, int u, const char *sig)
{
    for (int w = 0; w < u; w++) {
        char s2[128];
        hp_profile_signature(&m->units[w], s2, sizeof(s2));
        if (strcmp(sig, s2) == 0)
            return 1;
    }
    return 0;
}

/* The medians of `steps` timed forward and backward passes of a one-unit net of unit u, and
 * the net's memory. */
static int profile_unit(const struct hp_options *o, const struct hp_model *m, int u,
                        struct hp_backend *be, double *fwd_s, double *bwd_s, size_t *memory)
{
    const struct hp_net_config cfg = {.batch = (int)o->batch, .nslots = 1, .need_input_grad = 1};
    const size_t nin = (size_t)o->batch * hp_shape_size(m->units[u].in);
    const size_t nout = (size_t)o->batch * hp_shape_size(m->units[u].out);
    const size_t nmax = nin > nout ? nin : nout;
    double *fwd = malloc((size_t)o->steps * sizeof(double));
    double *bwd = malloc((size_t)o->steps * sizeof(double));
    float *host = malloc(nmax * sizeof(float));
    struct hp_net *net = NULL;
    struct hp_net_memory mem;
    int rc = fwd && bwd && host ? 0 : -HP_ENOMEM;

    if (!rc)
        rc = hp_net_create(be, m, u, u + 1, &cfg, &net);
    if (!rc)
        rc = hp_net_init_params(net, 1);
    for (size_t i = 0; !rc && i < nmax; i++)
        host[i] = 2.0f * hp_rng_uniform(3, i) - 1.0f;
    if (!rc)
        rc = be->ops->upload(be, hp_net_input(net, 0), host, nin * sizeof(float));
    for (long s = 0; s <= o->steps && !rc; s++) {
        double t0, t1;
        /* before each backward: backward may overwrite it (net.h) */
        rc = be->ops->upload(be, hp_net_output_grad(net), host, nout * sizeof(float));
        be->ops->sync(be);
        t0 = hp_now_s();
        if (!rc)
            rc = hp_net_forward(net, 0, 1, (uint64_t)s);
        be->ops->sync(be);
        t1 = hp_now_s();
        if (!rc)
            rc = hp_net_backward(net, 0);
        be->ops->sync(be);
        if (s > 0) { /* step 0 warms up */
            fwd[s - 1] = t1 - t0;
            bwd[s - 1] = hp_now_s() - t1;
        }
    }
    if (!rc) {
        qsort(fwd, (size_t)o->steps, sizeof(double), by_value);
        qsort(bwd, (size_t)o->steps, sizeof(double), by_value);
        *fwd_s = fwd[o->steps / 2];
        *bwd_s = bwd[o->steps / 2];
        hp_net_memory(net, &mem);
        *memory = mem.total;
    }
    hp_net_destroy(net);
    free(fwd);
    free(bwd);
    free(host);
    return rc;
}

static int write_units(const struct hp_options *o, const struct hp_model *m, struct hp_backend *be,
                       FILE *f)
{
    printf("%-16s %-34s %10s %10s %12s\n", "unit", "signature", "fwd ms", "bwd ms", "memory MiB");
    for (int u = 0; u < m->nunits; u++) {
        char sig[128];
        double fwd, bwd;
        size_t memory;
        int rc;
        hp_profile_signature(&m->units[u], sig, sizeof(sig));
        if (seen_before(m, u, sig))
            continue;
        if ((rc = profile_unit(o, m, u, be, &fwd, &bwd, &memory)))
            return rc;
        fprintf(f, "\n[unit.%s]\nfwd_s = %.9g\nbwd_s = %.9g\nmemory = %zu\n", sig, fwd, bwd,
                memory);
        printf("%-16s %-34.34s %10.3f %10.3f %12.1f\n", m->units[u].name, sig, 1e3 * fwd, 1e3 * bwd,
               (double)memory / 1048576.0);
    }
    return 0;
}

int hp_cmd_profile(int argc, char **argv)
{
    struct hp_options o;
    struct hp_model *m = NULL;
    struct hp_backend *be = NULL;
    FILE *f = NULL;
    int rc = hp_cmd_options(HP_CMD_PROFILE, synopsis, argc, argv, &o, 0, NULL);

    if (rc >= 0)
        return rc;
    if ((rc = hp_model_load(o.model, &m)) ||
        (rc = hp_backend_create(hp_opt_word(HP_OPT_DEVICE, o.device), &be)))
        goto done;
    f = hp_out_open(o.out, "profile", 0666);
    if (!f) {
        rc = -HP_EIO;
        goto done;
    }
    fprintf(f,
            "; hetpipe profile of model %s, written by hetpipe profile\n[profile]\nversion = 1\n"
            "type = %s\ndevice = %s\nbatch = %ld\n",
            m->name, o.type ? o.type : (be->kind == HP_DEVICE_CPU ? "cpu" : be->name), be->name,
            o.batch);
    rc = write_units(&o, m, be, f);
    if (hp_out_close(f, !rc) && !rc)
        rc = -HP_EIO;
    f = NULL;
    if (!rc)
        printf("profile written to %s\n", o.out);
done:
    hp_out_close(f, 0);
    hp_backend_destroy(be);
    hp_model_destroy(m);
    if (rc)
        hp_cmd_report("profile", rc);
    return rc ? 1 : 0;
}
