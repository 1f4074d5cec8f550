/* fuzz_model.c - model definitions (etc/models/NAME.ini): hp_model_load. */
#include "fuzz.h"
#include "model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_model *m = NULL;
    char path[512];

    fuzz_begin();
    fuzz_write("model.ini", data, size, path, sizeof(path));
    if (hp_model_load(path, &m) == 0) {
        struct hp_unit_cost c = hp_model_cost(m, 0, m->nunits);
        (void)c;
        hp_model_destroy(m);
    }
    return 0;
}
