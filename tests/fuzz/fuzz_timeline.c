/* fuzz_timeline.c - a rank's timeline part (RUN_DIR/timeline.R, common/tlpart.h):
 * hp_tl_part_read, and a part read back written again and re-read (the writer and the reader
 * agree). */
#include "fuzz.h"
#include "tlpart.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hp_tl_meta meta, back;
    struct hp_tl_event *ev = NULL, *ev2 = NULL;
    char path[512], path2[512];
    long n = 0, n2 = 0;

    fuzz_begin();
    fuzz_write("timeline.0", data, size, path, sizeof(path));
    if (hp_tl_part_read(path, &meta, &ev, &n) == 0) {
        snprintf(path2, sizeof(path2), "%s/timeline.1", fuzz_dir);
        if (hp_tl_part_write(path2, &meta, ev, n, meta.dropped) != 0 ||
            hp_tl_part_read(path2, &back, &ev2, &n2) != 0 || n2 != n || back.rank != meta.rank ||
            back.vw != meta.vw || back.stage != meta.stage || back.dropped != meta.dropped ||
            strcmp(back.node, meta.node) != 0 || strcmp(back.gpu, meta.gpu) != 0)
            abort(); /* a part that reads does not survive its own writer */
        for (long i = 0; i < n; i++)
            if (ev2[i].kind != ev[i].kind || ev2[i].mb != ev[i].mb || ev2[i].peer != ev[i].peer ||
                ev2[i].bytes != ev[i].bytes || ev2[i].wave != ev[i].wave)
                abort();
        free(ev2);
        free(ev);
    }
    return 0;
}
