/* jobreport.h - the report page of a finished job (hetpipe report; hetpipe launch at the end of
 * a job): one self-contained HTML file (inline CSS and SVG, one small inline script, nothing
 * fetched) read from the job's run directory (jobdata.h):
 *
 *   1. the job: model, policy, cluster, GPUs, VWs, Nm, staleness D, batch, epochs, the test
 *      accuracy reached and the job's images/s measured against predicted;
 *   2. warnings, each naming its rank, VW or stage: a stage slower than planned, a VW that
 *      waits more than it computes, a GPU near its memory, errors in the rank logs; then
 *      what is missing and how to get it;
 *   3. a table of predicted and measured throughput per VW and per stage;
 *   4. pictures (reportfig.h): the pipeline, loss and accuracy (with other runs for
 *      comparison), the plan;
 *   5. the files it was made from.
 *
 * A job of several runs (rundir.h: the job directory, then run-1, run-2, ... in it) gets one
 * page: a table of its runs (times, status, the checkpoint each resumed from, its GPUs, the time
 * lost to each interruption) after the header, the curves over every run with each restart
 * marked, the plans of the earlier runs when the GPUs changed; the rest is the last run's.
 *
 * The script sets data-check on <body> once the page has loaded: "ok" when every <figure>
 * holds an <svg> with a nonzero box and no script failed, else "missing: ..." / "error: ...".
 */
#ifndef HP_JOBREPORT_H
#define HP_JOBREPORT_H

/* Write the report of the job in run_dir to `out` (NULL: run_dir/report.html) with
 * hp_out_open. more[0 .. nmore) are other run directories whose loss and accuracy are drawn
 * beside it (each needs a plan.ini; their other files are not used). config: the site config
 * with the GPU database, NULL for the default place. 0, or a negative code after an error
 * message naming the directory or file and what is wrong. */
int hp_report_write(const char *run_dir, const char *const *more, int nmore, const char *out,
                    const char *config);

#endif
