/* reportfig.h - the pictures of the report page (jobreport.h), drawn as inline SVG (svg.h)
 * from a run directory's files (jobdata.h). Each writes one <svg> element, also when its data
 * is missing (then it says what is missing and how to record it). Write errors show in
 * ferror(f).
 */
#ifndef HP_REPORTFIG_H
#define HP_REPORTFIG_H

#include "jobdata.h"

#include <stdio.h>

/* The pipeline over a window of minibatches (from wave 1 on: about 3 waves, at least twice the
 * stages): one row per GPU rank, x the seconds since the job started; forward passes solid,
 * backward passes hatched, in a colour per minibatch; receive waits grey, WSP waits red,
 * pushes and pulls purple, allreduces orange, bubbles empty. From the timeline parts. */
void hp_fig_pipeline(FILE *f, const struct hp_jobdata *d);

/* A mark across the curves: a restart of the job, at `seconds` since the job's first start and
 * at `samples` (where the restart resumed). */
struct hp_fig_mark {
    double seconds, samples;
    char label[32];
};

/* Loss and accuracy (train lines, test points) against seconds and against samples (step x
 * batch): four panels, one colour per run (runs[0] the job, the others for comparison),
 * labelled by the run directory's name and policy. A line breaks where its metrics' part
 * changes (the runs of a requeued job); marks[0 .. nmarks) are drawn as dashed vertical lines
 * with their labels in every panel. */
void hp_fig_curves(FILE *f, const struct hp_jobdata *const *runs, int nruns,
                   const struct hp_fig_mark *marks, int nmarks);

/* The plan: every VW a box of its stages (GPU type, node, device, units by name, planned
 * memory against the type's memory as a bar, the measured peak marked), then each PS shard
 * with the units it holds. */
void hp_fig_plan(FILE *f, const struct hp_jobdata *d);

#endif
