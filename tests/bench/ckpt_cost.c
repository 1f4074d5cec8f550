/* ckpt_cost.c - what a checkpoint of a model costs (tests/bench/checkpoint): every unit's
 * parameters, momentum and batch-norm statistics written as one rank's part (runtime/ckpt.h:
 * records with CRC-32, fsync, rename) plus the manifest, then checked whole (every file's
 * CRC-32, as --resume does) and read back record by record (as a resuming rank does).
 *
 *   bench_ckpt_cost MODEL DIR [PARTS]
 *
 * PARTS (default 1): the units split over that many part files, written one after another
 * (as ranks on one node would, but serially). Prints one line: model, bytes, write and load
 * seconds and MB/s. The data are the model's real sizes, filled with a pattern. */
#include "ckptfile.h"
#include "clock.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_ckpt(const struct hp_model *m, const char *parent, int parts, const float *buf,
                      char *dir, size_t n, uint64_t *total)
{
    struct hp_ckpt_info ci = {.nunits = m->nunits,
                              .model_sig = hp_ckpt_model_sig(m),
                              .seed = 1,
                              .batch = 32,
                              .ntrain = 1,
                              .epochs = 1,
                              .nvws = 1,
                              .nranks = parts};
    char plan[4300];
    long seq;
    FILE *f;

    if (hp_ckpt_new_dir(parent, 0, &seq, dir, n))
        return -1;
    ci.seq = seq;
    ci.names = calloc((size_t)parts + 1, sizeof(*ci.names));
    ci.bytes = calloc((size_t)parts + 1, sizeof(*ci.bytes));
    ci.crc = calloc((size_t)parts + 1, sizeof(*ci.crc));
    snprintf(ci.dir, sizeof(ci.dir), "%s", dir);
    snprintf(ci.model, sizeof(ci.model), "%s", m->name);
    snprintf(ci.reason, sizeof(ci.reason), "bench");
    for (int p = 0; p < parts; p++) {
        struct hp_ckpt_writer *w;
        if (hp_ckpt_part_create(dir, p, &w))
            return -1;
        for (int u = p; u < m->nunits; u += parts) {
            const size_t pb = m->units[u].nparams * sizeof(float);
            const size_t sb = m->units[u].nstate * sizeof(float);
            if ((pb && (hp_ckpt_part_add(w, HP_CK_PARAMS, u, 0, buf, pb) ||
                        hp_ckpt_part_add(w, HP_CK_MOMENTUM, u, 0, buf, pb))) ||
                (sb && hp_ckpt_part_add(w, HP_CK_STATE, u, 0, buf, sb)))
                return -1;
        }
        if (hp_ckpt_part_close(w, &ci.bytes[p], &ci.crc[p]))
            return -1;
        snprintf(ci.names[p], sizeof(ci.names[p]), "rank-%d.part", p);
    }
    snprintf(plan, sizeof(plan), "%s/bench-plan.ini", parent);
    if (!(f = fopen(plan, "w")))
        return -1;
    fputs("[plan]\n", f);
    fclose(f);
    if (hp_ckpt_copy_file(plan, dir, "plan.ini", &ci.bytes[parts], &ci.crc[parts]))
        return -1;
    snprintf(ci.names[parts], sizeof(ci.names[parts]), "plan.ini");
    ci.nfiles = parts + 1;
    *total = 0;
    for (int i = 0; i < ci.nfiles; i++)
        *total += ci.bytes[i];
    const int rc = hp_ckpt_manifest_write(&ci);
    hp_ckpt_info_release(&ci);
    return rc;
}

static int load_ckpt(const struct hp_model *m, const char *dir, int parts, float *buf)
{
    struct hp_ckpt_info ci;
    char why[512];

    if (hp_ckpt_check(dir, 1, &ci, why, sizeof(why))) {
        fprintf(stderr, "ckpt_cost: %s: %s\n", dir, why);
        return -1;
    }
    hp_ckpt_info_release(&ci);
    for (int p = 0; p < parts; p++) {
        struct hp_ckpt_reader *r;
        if (hp_ckpt_part_open(dir, p, &r))
            return -1;
        for (int u = p; u < m->nunits; u += parts) {
            const size_t pb = m->units[u].nparams * sizeof(float);
            const size_t sb = m->units[u].nstate * sizeof(float);
            if ((pb && (hp_ckpt_part_read(r, HP_CK_PARAMS, u, buf, pb) ||
                        hp_ckpt_part_read(r, HP_CK_MOMENTUM, u, buf, pb))) ||
                (sb && hp_ckpt_part_read(r, HP_CK_STATE, u, buf, sb))) {
                hp_ckpt_part_close_reader(r);
                return -1;
            }
        }
        hp_ckpt_part_close_reader(r);
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct hp_model *m = NULL;
    char dir[4000];
    size_t most = 1;
    uint64_t bytes = 0;

    if (argc < 3) {
        fprintf(stderr, "usage: bench_ckpt_cost MODEL DIR [PARTS]\n");
        return 2;
    }
    const int parts = argc > 3 ? atoi(argv[3]) : 1;
    if (parts < 1 || hp_model_load(argv[1], &m))
        return 1;
    for (int u = 0; u < m->nunits; u++) {
        most = m->units[u].nparams > most ? m->units[u].nparams : most;
        most = m->units[u].nstate > most ? m->units[u].nstate : most;
    }
    float *buf = malloc(most * sizeof(float));
    if (!buf)
        return 1;
    for (size_t i = 0; i < most; i++)
        buf[i] = (float)(i % 1000) * 1e-3f;
    const double t0 = hp_now_s();
    if (write_ckpt(m, argv[2], parts, buf, dir, sizeof(dir), &bytes))
        return 1;
    const double t1 = hp_now_s();
    if (load_ckpt(m, dir, parts, buf))
        return 1;
    const double t2 = hp_now_s();
    printf("%-10s %10zu params %8.1f MB  write %7.3f s (%6.0f MB/s)  check+load %7.3f s "
           "(%6.0f MB/s)\n",
           m->name, m->nparams, bytes / 1e6, t1 - t0, bytes / 1e6 / (t1 - t0), t2 - t1,
           bytes / 1e6 / (t2 - t1));
    hp_ckpt_remove(dir);
    free(buf);
    hp_model_destroy(m);
    return 0;
}
