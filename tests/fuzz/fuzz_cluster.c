/* fuzz_cluster.c - cluster descriptions (etc/clusters/NAME.ini): hp_cluster_load, with the GPU
 * types of the repository's site config (etc/hetpipe.conf, found as hetpipe finds it). */
#include "cluster.h"
#include "fuzz.h"

static struct hp_gpudb db;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    fuzz_load_db("fuzz_cluster", &db);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_cluster c;
    char path[512];

    fuzz_begin();
    fuzz_write("cluster.ini", data, size, path, sizeof(path));
    if (hp_cluster_load(path, &db, &c) == 0) {
        for (int g = 0; g < c.ngpus; g++)
            if (c.gpus[g].node < 0 || c.gpus[g].node >= c.nnodes || c.gpus[g].type < 0 ||
                c.gpus[g].type >= db.ntypes)
                abort(); /* a loaded cluster that points outside itself */
        hp_cluster_release(&c);
    }
    return 0;
}
