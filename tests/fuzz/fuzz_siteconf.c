/* fuzz_siteconf.c - the site configuration (etc/hetpipe.conf): hp_gpudb_load. */
#include "fuzz.h"
#include "gpudb.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_gpudb db;
    char path[512];

    fuzz_begin();
    fuzz_write("hetpipe.conf", data, size, path, sizeof(path));
    if (hp_gpudb_load(path, &db) == 0) {
        for (int i = 0; i < db.ntypes; i++)
            if (hp_gpudb_find(&db, db.types[i].name) != i)
                abort(); /* a type that cannot be found by its own name */
        hp_gpudb_release(&db);
    }
    return 0;
}
