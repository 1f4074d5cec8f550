/* ps.c - what both sides of the parameter-server protocol share (ps.h): the trace files. */
#include "ps.h"

#include "log.h"
#include "output.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

FILE *hp_ps_trace_open(const char *prefix, int rank)
{
    char path[4096];
    FILE *f;

    if (!prefix)
        return NULL;
    snprintf(path, sizeof(path), "%s.%d", prefix, rank);
    f = hp_out_open(path, "trace", 0666);
    if (!f) {
        return NULL;
    }
    fputs(HP_TRACE_HEADER, f);
    return f;
}

void hp_ps_trace_clocks(FILE *f, const int64_t *mm, int nvws)
{
    for (int x = 0; x < nvws; x++)
        fprintf(f, "%s%" PRId64 ":%" PRId64, x ? ";" : "", mm[2 * x], mm[2 * x + 1]);
    fputc('\n', f);
}
