/* fuzz_gres.c - Slurm's gres_detail_str of one node ("gpu:titanv:2(IDX:0-1),..."):
 * hp_gres_detail_parse. */
#include "fuzz.h"
#include "slurm.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct hp_alloc_node n;
    char *s = fuzz_str(data, size), err[1024];

    fuzz_begin();
    memset(&n, 0, sizeof(n));
    snprintf(n.name, sizeof(n.name), "node1");
    if (hp_gres_detail_parse(s, &n, err, sizeof(err)) == 0) {
        if (n.ngpus < 0 || n.ngpus > HP_ALLOC_GPUS_MAX)
            abort();
        for (int i = 0; i < n.ngpus; i++)
            if (!n.gpus[i].type[0] || (i > 0 && n.gpus[i - 1].index >= n.gpus[i].index))
                abort(); /* untyped, or not in strictly increasing IDX order */
    } else if (!err[0]) {
        abort();
    } else {
        snprintf(fuzz_log, sizeof(fuzz_log), "%s", err);
    }
    free(s);
    return 0;
}
