/* fuzz_binding.c - binding files (TASK NODE DEVICE ROLE lines): hp_binding_read, and each
 * entry's role parsed back. A file that starts with the comment "#step STEP_GPUS CVD" also has
 * each entry's GPU looked up in those lists (SLURM_STEP_GPUS, CUDA_VISIBLE_DEVICES) as the
 * plugin does in slurmstepd: hp_binding_visible_device. */
#include "binding.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_binding *b = NULL;
    char path[512], err[1024];
    int n = 0;

    fuzz_begin();
    fuzz_write("binding", data, size, path, sizeof(path));
    if (hp_binding_read(path, &b, &n, err, sizeof(err)) == 0) {
        char step[256] = "", cvd[256] = "", dev[64];
        const int lists = size > 6 && memcmp(data, "#step ", 6) == 0;
        if (lists) {
            char *head = fuzz_str(data + 6, size - 6 < 600 ? size - 6 : 600);
            if (sscanf(head, "%255s %255s", step, cvd) < 1)
                step[0] = '\0';
            free(head);
        }
        for (int i = 0; i < n; i++) {
            int vw, stage;
            if (b[i].task != i || hp_binding_role_parse(b[i].role, &vw, &stage) != 0)
                abort(); /* read accepted what it should have refused */
            if (lists && b[i].device >= 0 &&
                hp_binding_visible_device(step, cvd, b[i].device, dev, sizeof(dev), err,
                                          sizeof(err)) == 0 &&
                !dev[0])
                abort(); /* bound to an empty CUDA_VISIBLE_DEVICES */
        }
        free(b);
    } else if (!memchr(err, '\0', sizeof(err)) || !err[0]) {
        abort(); /* a refusal without a message */
    } else {
        snprintf(fuzz_log, sizeof(fuzz_log), "%s", err);
    }
    return 0;
}
