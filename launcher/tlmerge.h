/* tlmerge.h - the ranks' timeline parts (common/tlpart.h) merged into one Chrome
 * trace-event JSON file that Perfetto (ui.perfetto.dev) and chrome://tracing open:
 *   - one process per VW ("VW v: K stages, Nm N"; dp: "replica v"), one for the PS shards;
 *   - one track (thread) per rank: "stage S: TYPE on NODE (rank R)", sorted by stage;
 *   - a complete event ("ph":"X") per recorded event, times in microseconds from the job's
 *     first event on rank 0's clock (each part's clock_offset_s added), its kind as the
 *     category and mb, wave, peer and bytes as arguments;
 *   - a flow ("ph":"s" on the send, "ph":"f" on the receive) from every activation or
 *     gradient send to the receive that took it (matched by sender, receiver, kind and
 *     minibatch).
 */
#ifndef HP_TLMERGE_H
#define HP_TLMERGE_H

#include "tlpart.h"

/* Every rank's part: PREFIX.0 .. PREFIX.(nranks - 1). */
struct hp_tl_job {
    int nranks;
    struct hp_tl_meta *meta; /* [nranks] (meta[r].rank = -1: its part is missing) */
    struct hp_tl_event **ev; /* [nranks] */
    long *n;                 /* [nranks] */
    int missing;             /* parts not found or not readable */
    double t0;               /* the first event, on rank 0's clock */
};

/* Read the parts PREFIX.R of ranks 0 .. nranks - 1. A missing or broken part is named in a
 * warning and left out; 0 when at least one was read, else -HP_EDATA. */
int hp_tl_job_load(const char *prefix, int nranks, struct hp_tl_job *job);
void hp_tl_job_release(struct hp_tl_job *job);

/* Write the job's timeline as trace-event JSON to `out` (hp_out_open). 0 or a negative code
 * (logged). *nevents and *nflows (may be NULL): what it holds. */
int hp_tl_job_write_json(const struct hp_tl_job *job, const char *out, long *nevents, long *nflows);

/* The ranks of run or job directory `dir` (its plan.ini's [plan] ranks). 0, or a negative
 * code with an error naming the directory. */
int hp_tl_ranks_of(const char *dir, int *nranks);

/* hetpipe run / launch at a job's end: load PREFIX.*, write `out`, print one line saying
 * where it is and how to open it. */
int hp_tl_merge(const char *prefix, int nranks, const char *out);

#endif
