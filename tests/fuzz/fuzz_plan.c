/* fuzz_plan.c - plan files: hp_planfile_load (GPU types from the repository's site config),
 * and a loaded plan written back (hp_planfile_write into memory). */
#include "fuzz.h"
#include "planfile.h"

static struct hp_gpudb db;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    fuzz_load_db("fuzz_plan", &db);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_plan p;
    struct hp_cluster cl;
    char path[512], token[33];

    fuzz_begin();
    fuzz_write("plan.ini", data, size, path, sizeof(path));
    if (hp_planfile_load(path, &db, &p, &cl, token) == 0) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (f) {
            hp_planfile_write(f, &p, &cl, &db, token);
            fclose(f);
        }
        free(text);
        hp_plan_release(&p);
        hp_cluster_release(&cl);
    }
    return 0;
}
