/* options.c - the options table of record and its parsing (options.h); libc only. */
#include "options.h"

#include "parse.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HP_DATADIR
#define MODELS_DIR HP_DATADIR "/models"
#else
#define MODELS_DIR "/usr/local/share/hetpipe/models"
#endif
#ifdef HP_SYSCONFDIR
#define CONFIG_PATH HP_SYSCONFDIR "/hetpipe.conf"
#else
#define CONFIG_PATH "/etc/hetpipe/hetpipe.conf"
#endif

#define IN(c) (1u << HP_CMD_##c)
#define OFF(field) offsetof(struct hp_options, field)
#define JOB_CMDS (IN(PLAN) | IN(RUN) | IN(LAUNCH))
#define RANK_CMDS (IN(RUN) | IN(LAUNCH) | IN(RANK))
#define TRAIN_CMDS (IN(TRAIN) | RANK_CMDS)

static const char *const policy_words[] = {"auto", "np", "ed", "hd", "dp", NULL};
static const char *const placement_words[] = {"default", "local", NULL};
static const char *const recompute_words[] = {"auto", "never", "always", NULL};
static const char *const schedule_words[] = {"cosine", "constant", NULL};
static const char *const device_words[] = {"cpu", "cuda", "auto", NULL};
static const struct hp_opt_special auto_zero[] = {{"auto", 0.0}, {NULL, 0.0}};
static const struct hp_opt_special emulate_words[] = {{"auto", -1.0}, {"off", 0.0}, {NULL, 0.0}};

const struct hp_opt_info hp_opts[HP_OPT_COUNT] = {
    [HP_OPT_POLICY] = {.flag = "policy",
                       .env = "HETPIPE_POLICY",
                       .plan_key = "policy",
                       .type = HP_OT_WORD,
                       .arg = "auto|np|ed|hd|dp",
                       .words = policy_words,
                       .def = "auto",
                       .cmd_def = {[HP_CMD_RUN] = "ed"},
                       .cmds = JOB_CMDS,
                       .offset = OFF(policy),
                       .help = "how the GPUs are grouped into virtual workers"},
    [HP_OPT_PLACEMENT] = {.flag = "placement",
                          .env = "HETPIPE_PLACEMENT",
                          .plan_key = "placement",
                          .type = HP_OT_WORD,
                          .arg = "default|local",
                          .words = placement_words,
                          .def = "default",
                          .cmds = JOB_CMDS,
                          .offset = OFF(placement),
                          .help = "where the parameter-server shards keep each unit"},
    [HP_OPT_STALENESS] = {.flag = "staleness",
                          .env = "HETPIPE_STALENESS",
                          .plan_key = "staleness",
                          .type = HP_OT_INT,
                          .arg = "D",
                          .min = 0,
                          .max = 1000000,
                          .site_max = 64,
                          .def = "0",
                          .cmds = JOB_CMDS,
                          .offset = OFF(staleness),
                          .help = "WSP staleness bound D, in waves"},
    [HP_OPT_NM] = {.flag = "nm",
                   .env = "HETPIPE_NM",
                   .plan_key = "nm",
                   .type = HP_OT_INT,
                   .arg = "auto|N",
                   .special = auto_zero,
                   .min = 1,
                   .max = 1024,
                   .site_max = 64,
                   .def = "auto",
                   .cmds = JOB_CMDS,
                   .offset = OFF(nm),
                   .help = "minibatches in flight per virtual worker"},
    [HP_OPT_RECOMPUTE] = {.flag = "recompute",
                          .env = "HETPIPE_RECOMPUTE",
                          .plan_key = "recompute",
                          .type = HP_OT_WORD,
                          .arg = "auto|never|always",
                          .words = recompute_words,
                          .def = "auto",
                          .cmds = JOB_CMDS | IN(TRAIN) | IN(TIME),
                          .offset = OFF(recompute),
                          .help = "recompute activations in backward instead of keeping them: "
                                  "auto where a stage or Nm would not fit otherwise"},
    [HP_OPT_MODEL] = {.flag = "model",
                      .env = "HETPIPE_MODEL",
                      .plan_key = "model",
                      .type = HP_OT_MODEL,
                      .arg = "NAME|PATH",
                      .def = "cnn",
                      .cmd_def = {[HP_CMD_PLAN] = "vgg19", [HP_CMD_MODEL] = ""},
                      .cmds = JOB_CMDS | IN(TRAIN) | IN(MODEL) | IN(TIME) | IN(PROFILE),
                      .offset = OFF(model),
                      .help = "the model to train"},
    [HP_OPT_BATCH] =
        {.flag = "batch",
         .env = "HETPIPE_BATCH",
         .plan_key = "batch",
         .type = HP_OT_INT,
         .arg = "N",
         .min = 1,
         .max = 65536,
         .def = "64",
         .cmd_def = {[HP_CMD_PLAN] = "32", [HP_CMD_TIME] = "32", [HP_CMD_PROFILE] = "32"},
         .cmds = JOB_CMDS | IN(TRAIN) | IN(TIME) | IN(PROFILE),
         .offset = OFF(batch),
         .help = "minibatch size"},
    [HP_OPT_EPOCHS] = {.flag = "epochs",
                       .env = "HETPIPE_EPOCHS",
                       .type = HP_OT_INT,
                       .arg = "N",
                       .min = 1,
                       .max = 10000,
                       .def = "5",
                       .cmd_def = {[HP_CMD_LAUNCH] = "1"},
                       .cmds = TRAIN_CMDS,
                       .flags = HP_OPTF_PASS,
                       .offset = OFF(epochs),
                       .help = "epochs to train"},
    [HP_OPT_CHECKPOINT_DIR] = {.flag = "checkpoint-dir",
                               .env = "HETPIPE_CHECKPOINT_DIR",
                               .type = HP_OT_TEXT,
                               .arg = "DIR",
                               .cmds = IN(RUN) | IN(LAUNCH) | IN(RANK),
                               .flags = HP_OPTF_PASS,
                               .offset = OFF(checkpoint_dir),
                               .help = "take checkpoints into DIR (ckpt-N/ below it): every "
                                       "--checkpoint-every, and on SIGUSR1 or SIGTERM before "
                                       "stopping (hetpipe launch: DIR defaults to "
                                       "hetpipe-JOBID.ckpt in the submit directory)"},
    [HP_OPT_CHECKPOINT_EVERY] = {.flag = "checkpoint-every",
                                 .env = "HETPIPE_CHECKPOINT_EVERY",
                                 .type = HP_OT_TEXT,
                                 .arg = "N|Nmin|Nh",
                                 .cmds = IN(RUN) | IN(LAUNCH) | IN(RANK),
                                 .flags = HP_OPTF_PASS,
                                 .offset = OFF(checkpoint_every),
                                 .help = "checkpoint every N training samples, or every N "
                                         "minutes (Nmin) or hours (Nh) of training"},
    [HP_OPT_CHECKPOINT_KEEP] = {.flag = "checkpoint-keep",
                                .env = "HETPIPE_CHECKPOINT_KEEP",
                                .type = HP_OT_INT,
                                .arg = "N",
                                .min = 1,
                                .max = 1000,
                                .site_max = 1000,
                                .def = "2",
                                .cmds = IN(RUN) | IN(LAUNCH) | IN(RANK),
                                .flags = HP_OPTF_PASS,
                                .offset = OFF(checkpoint_keep),
                                .help = "keep the last N checkpoints (older ones are removed)"},
    [HP_OPT_RESUME] = {.flag = "resume",
                       .env = "HETPIPE_RESUME",
                       .type = HP_OT_TEXT,
                       .arg = "auto|DIR",
                       .cmds = IN(RUN) | IN(LAUNCH) | IN(RANK),
                       .flags = HP_OPTF_PASS,
                       .offset = OFF(resume),
                       .help = "resume from checkpoint DIR (a ckpt-N directory), or auto: the "
                               "newest valid one in --checkpoint-dir (none: start afresh); "
                               "re-plans when the GPUs differ"},
    [HP_OPT_TIMELINE] = {.flag = "timeline",
                         .env = "HETPIPE_TIMELINE",
                         .type = HP_OT_TEXT,
                         .arg = "FILE",
                         .cmds = IN(RUN) | IN(LAUNCH) | IN(RANK),
                         .offset = OFF(timeline),
                         .help = "record what every rank does, when, and merge it into FILE, a "
                                 "Chrome trace (Perfetto, chrome://tracing); the parts stay in "
                                 "the run directory for hetpipe report (hetpipe-rank: writes "
                                 "FILE.<rank>)"},
    [HP_OPT_DRY_RUN] = {.flag = "dry-run",
                        .env = "HETPIPE_DRY_RUN",
                        .type = HP_OT_FLAG,
                        .cmds = IN(LAUNCH),
                        .offset = OFF(dry_run),
                        .help = "plan and print the predicted throughput; start no rank"},

    [HP_OPT_NM_MAX] = {.flag = "nm-max",
                       .plan_key = "nm_max",
                       .type = HP_OT_INT,
                       .arg = "auto|N",
                       .special = auto_zero,
                       .min = 1,
                       .max = 1024,
                       .def = "auto",
                       .cmds = JOB_CMDS,
                       .offset = OFF(nm_max),
                       .help = "the largest Nm the search tries (auto: the VW's stage count)"},
    [HP_OPT_SEED] = {.flag = "seed",
                     .plan_key = "seed",
                     .type = HP_OT_INT,
                     .arg = "N",
                     .min = 0,
                     .max = 2147483647,
                     .def = "1",
                     .cmds = JOB_CMDS | IN(TRAIN),
                     .offset = OFF(seed),
                     .help = "seed of initialisation, shuffling and dropout"},
    [HP_OPT_CLUSTER] = {.flag = "cluster",
                        .type = HP_OT_TEXT,
                        .arg = "FILE|NAME",
                        .cmd_def = {[HP_CMD_RUN] = "demo"},
                        .cmds = IN(PLAN) | IN(RUN),
                        .offset = OFF(cluster),
                        .help = "the cluster description (etc/clusters/NAME.ini)"},
    [HP_OPT_CONFIG] = {.flag = "config",
                       .type = HP_OT_TEXT,
                       .arg = "FILE",
                       .cmds = JOB_CMDS | IN(RANK) | IN(DOCTOR) | IN(REPORT),
                       .offset = OFF(config),
                       .help = "the site config with the GPU database (default: $HETPIPE_CONF, "
                               "./etc/hetpipe.conf, next to hetpipe, /etc/hetpipe)"},
    [HP_OPT_PROFILE] = {.flag = "profile",
                        .type = HP_OT_TEXT,
                        .arg = "FILE",
                        .cmds = JOB_CMDS,
                        .offset = OFF(profile),
                        .help = "measured unit times (hetpipe profile) instead of estimates"},
    [HP_OPT_OUT] = {.flag = "out",
                    .type = HP_OT_TEXT,
                    .arg = "FILE",
                    .cmd_def = {[HP_CMD_PROFILE] = "profile.ini"},
                    .cmds = IN(PLAN) | IN(PROFILE) | IN(REPORT) | IN(TIMELINE),
                    .offset = OFF(out),
                    .help = "write the plan (the profile, the report page, the timeline) there"},
    [HP_OPT_QUIET] = {.flag = "quiet",
                      .type = HP_OT_FLAG,
                      .cmds = IN(PLAN) | RANK_CMDS,
                      .flags = HP_OPTF_PASS,
                      .offset = OFF(quiet),
                      .help = "print no plan table and no progress (evaluations, the summary and "
                              "errors still)"},
    [HP_OPT_VERBOSE] = {.flag = "verbose",
                        .type = HP_OT_FLAG,
                        .cmds = RANK_CMDS,
                        .flags = HP_OPTF_PASS,
                        .offset = OFF(verbose),
                        .help = "progress as a plain line every --log-every steps also on a "
                                "terminal (not one updating line), and the ranks' debug "
                                "messages"},

    [HP_OPT_LR] = {.flag = "lr",
                   .type = HP_OT_REAL,
                   .arg = "X",
                   .min = 1e-8,
                   .max = 10,
                   .def = "0.05",
                   .cmds = TRAIN_CMDS,
                   .flags = HP_OPTF_PASS,
                   .offset = OFF(lr),
                   .help = "learning rate (the job's: each of V virtual workers applies lr/V)"},
    [HP_OPT_MOMENTUM] = {.flag = "momentum",
                         .type = HP_OT_REAL,
                         .arg = "X",
                         .min = 0,
                         .max = 0.999,
                         .def = "0.9",
                         .cmds = TRAIN_CMDS,
                         .flags = HP_OPTF_PASS,
                         .offset = OFF(momentum),
                         .help = "SGD momentum"},
    [HP_OPT_WEIGHT_DECAY] = {.flag = "weight-decay",
                             .type = HP_OT_REAL,
                             .arg = "X",
                             .min = 0,
                             .max = 1,
                             .def = "0.0005",
                             .cmds = TRAIN_CMDS,
                             .flags = HP_OPTF_PASS,
                             .offset = OFF(weight_decay),
                             .help = "L2 weight decay"},
    [HP_OPT_SCHEDULE] = {.flag = "schedule",
                         .type = HP_OT_WORD,
                         .arg = "cosine|constant",
                         .words = schedule_words,
                         .def = "cosine",
                         .cmds = TRAIN_CMDS,
                         .flags = HP_OPTF_PASS,
                         .offset = OFF(schedule),
                         .help = "learning-rate schedule: cosine decay to 0, or constant"},
    [HP_OPT_TRAIN_LIMIT] = {.flag = "train-limit",
                            .type = HP_OT_INT,
                            .arg = "N",
                            .min = 0,
                            .max = 60000,
                            .def = "0",
                            .cmds = TRAIN_CMDS,
                            .flags = HP_OPTF_PASS,
                            .offset = OFF(train_limit),
                            .help = "train on the first N samples only (0: all)"},
    [HP_OPT_TEST_LIMIT] = {.flag = "test-limit",
                           .type = HP_OT_INT,
                           .arg = "N",
                           .min = 0,
                           .max = 10000,
                           .def = "0",
                           .cmds = TRAIN_CMDS,
                           .flags = HP_OPTF_PASS,
                           .offset = OFF(test_limit),
                           .help = "evaluate on the first N test samples only (0: all)"},
    [HP_OPT_LOG_EVERY] = {.flag = "log-every",
                          .type = HP_OT_INT,
                          .arg = "N",
                          .min = 0,
                          .max = 1000000,
                          .def = "100",
                          .cmds = TRAIN_CMDS,
                          .flags = HP_OPTF_PASS,
                          .offset = OFF(log_every),
                          .help = "steps between progress lines (0: none)"},
    [HP_OPT_DATA] = {.flag = "data",
                     .type = HP_OT_TEXT,
                     .arg = "DIR",
                     .cmds = TRAIN_CMDS | IN(DOCTOR),
                     .flags = HP_OPTF_PASS,
                     .offset = OFF(data),
                     .help = "the Fashion-MNIST directory (default $HETPIPE_DATA or "
                             "/usr/share/datasets/fashion-mnist)"},
    [HP_OPT_METRICS] = {.flag = "metrics",
                        .type = HP_OT_TEXT,
                        .arg = "FILE",
                        .cmds = TRAIN_CMDS,
                        .flags = HP_OPTF_PASS,
                        .offset = OFF(metrics),
                        .help = "write per-interval and per-evaluation metrics as CSV"},
    [HP_OPT_STEP_LOG] = {.flag = "step-log",
                         .type = HP_OT_TEXT,
                         .arg = "FILE",
                         .cmds = TRAIN_CMDS,
                         .flags = HP_OPTF_PASS,
                         .offset = OFF(step_log),
                         .help = "write every step's mean loss (step,loss) as CSV"},
    [HP_OPT_SAVE_PARAMS] = {.flag = "save-params",
                            .type = HP_OT_TEXT,
                            .arg = "FILE",
                            .cmds = TRAIN_CMDS,
                            .flags = HP_OPTF_PASS,
                            .offset = OFF(save_params),
                            .help = "write the final parameters (raw float32, model order; a "
                                    "job's ranks to FILE.<rank>)"},
    [HP_OPT_DEVICE] =
        {.flag = "device",
         .type = HP_OT_WORD,
         .arg = "cpu|cuda|auto",
         .words = device_words,
         .def = "auto",
         .cmd_def = {[HP_CMD_RUN] = "cpu", [HP_CMD_LAUNCH] = "cpu", [HP_CMD_RANK] = "cpu"},
         .cmds = TRAIN_CMDS | IN(TIME) | IN(PROFILE),
         .flags = HP_OPTF_PASS,
         .offset = OFF(device),
         .help = "the compute device (auto: cuda where there is one)"},
    [HP_OPT_THREADS] = {.flag = "threads",
                        .type = HP_OT_INT,
                        .arg = "N",
                        .min = 1,
                        .max = 1024,
                        .cmds = TRAIN_CMDS | IN(TIME) | IN(PROFILE),
                        .flags = HP_OPTF_PASS,
                        .offset = OFF(threads),
                        .help = "BLAS threads of the CPU backend (default: OpenBLAS's)"},

    [HP_OPT_WEIGHT_LOG] = {.flag = "weight-log",
                           .type = HP_OT_TEXT,
                           .arg = "PREFIX",
                           .cmds = RANK_CMDS,
                           .flags = HP_OPTF_PASS,
                           .offset = OFF(weight_log),
                           .help = "per minibatch, the weight versions and hashes each rank "
                                   "used, in PREFIX.<rank>"},
    [HP_OPT_STATS] = {.flag = "stats",
                      .type = HP_OT_TEXT,
                      .arg = "PREFIX",
                      .cmds = RANK_CMDS,
                      .flags = HP_OPTF_PASS,
                      .offset = OFF(stats),
                      .help = "each rank's timing, memory and traffic summary in PREFIX.<rank>"},
    [HP_OPT_TRACE] = {.flag = "trace",
                      .type = HP_OT_TEXT,
                      .arg = "PREFIX",
                      .cmds = RANK_CMDS,
                      .flags = HP_OPTF_PASS,
                      .offset = OFF(trace),
                      .help = "every push, pull, wait and minibatch record (WSP) in "
                              "PREFIX.<rank>"},
    [HP_OPT_EVAL_EVERY] = {.flag = "eval-every",
                           .type = HP_OT_INT,
                           .arg = "N",
                           .min = 0,
                           .max = 1000000000,
                           .def = "0",
                           .cmds = RANK_CMDS,
                           .flags = HP_OPTF_PASS,
                           .offset = OFF(eval_every),
                           .help = "also evaluate the global weights every N training samples "
                                   "of the job (0: after each epoch)"},
    [HP_OPT_STOP_AT] = {.flag = "stop-at",
                        .type = HP_OT_REAL,
                        .arg = "P",
                        .min = 0,
                        .max = 100,
                        .def = "0",
                        .cmds = RANK_CMDS,
                        .flags = HP_OPTF_PASS,
                        .offset = OFF(stop_at),
                        .help = "stop the job after the first evaluation at or above P% test "
                                "accuracy (0: never)"},
    [HP_OPT_TIMEOUT] = {.flag = "timeout",
                        .type = HP_OT_REAL,
                        .arg = "SEC",
                        .min = 0.1,
                        .max = 86400,
                        .def = "60",
                        .cmds = RANK_CMDS,
                        .flags = HP_OPTF_PASS,
                        .offset = OFF(timeout),
                        .help = "how long a rank waits for a peer"},
    [HP_OPT_NO_STASH] = {.flag = "no-stash",
                         .type = HP_OT_FLAG,
                         .cmds = RANK_CMDS,
                         .flags = HP_OPTF_PASS,
                         .offset = OFF(no_stash),
                         .help = "debug: backward passes use the current weights"},
    [HP_OPT_EMULATE] = {.flag = "emulate",
                        .type = HP_OT_REAL,
                        .arg = "auto|off|S",
                        .special = emulate_words,
                        .min = 0,
                        .max = 1e9,
                        .def = "off",
                        .cmd_def = {[HP_CMD_RUN] = "auto"},
                        .cmds = IN(RUN) | IN(RANK),
                        .offset = OFF(emulate),
                        .help = "pad each pass and send to S x the plan's time for the emulated "
                                "GPU type (auto: S so that padding dominates this CPU's time)"},

    [HP_OPT_LOCAL] = {.flag = "local",
                      .type = HP_OT_FLAG,
                      .cmds = IN(RUN),
                      .offset = OFF(local),
                      .help = "fork the ranks on this machine, CPU ranks emulating the "
                              "cluster's GPU types (no Slurm needed)"},
    [HP_OPT_KEEP] = {.flag = "keep",
                     .type = HP_OT_FLAG,
                     .cmds = IN(RUN),
                     .offset = OFF(keep),
                     .help = "keep the run directory after a successful run"},
    [HP_OPT_RUN_DIR] = {.flag = "run-dir",
                        .type = HP_OT_TEXT,
                        .arg = "DIR",
                        .cmds = IN(RUN) | IN(LAUNCH),
                        .offset = OFF(run_dir),
                        .help = "the job's private directory for plan, logs and address files "
                                "(created, mode 0700; default: a new one)"},
    [HP_OPT_PLAN] = {.flag = "plan",
                     .type = HP_OT_TEXT,
                     .arg = "FILE",
                     .cmds = IN(LAUNCH) | IN(RANK),
                     .offset = OFF(plan),
                     .help = "run this plan file (hetpipe plan --out) instead of planning"},
    [HP_OPT_SRUN] = {.flag = "srun",
                     .type = HP_OT_TEXT,
                     .arg = "PATH",
                     .cmds = IN(LAUNCH),
                     .offset = OFF(srun),
                     .help = "the srun to run (default: $HETPIPE_SRUN, else srun from PATH)"},
    [HP_OPT_RANK] = {.flag = "rank",
                     .type = HP_OT_INT,
                     .arg = "R",
                     .min = 0,
                     .max = (1 << 20) - 1,
                     .cmds = IN(RANK),
                     .offset = OFF(rank),
                     .help = "this process's rank (default $HETPIPE_RANK; from PMIx under srun)"},
    [HP_OPT_BOOT_DIR] = {.flag = "boot-dir",
                         .type = HP_OT_TEXT,
                         .arg = "DIR",
                         .cmds = IN(RANK),
                         .offset = OFF(boot_dir),
                         .help = "the private directory (mode 0700) of the address files "
                                 "(default $HETPIPE_BOOT_DIR)"},
    [HP_OPT_SELF_CHECK] = {.flag = "self-check",
                           .type = HP_OT_FLAG,
                           .cmds = IN(RANK),
                           .offset = OFF(self_check),
                           .help = "print what this program reaches (UCX, PMIx, the CUDA backend "
                                   "module) as 'key = value' lines for hetpipe doctor, and exit"},

    [HP_OPT_UNITS] = {.flag = "units",
                      .type = HP_OT_FLAG,
                      .cmds = IN(MODEL),
                      .offset = OFF(units),
                      .help = "list every unit with its output shape, parameters, FLOPs and "
                              "bytes"},
    [HP_OPT_STEPS] = {.flag = "steps",
                      .type = HP_OT_INT,
                      .arg = "N",
                      .min = 1,
                      .max = 1000000,
                      .def = "20",
                      .cmd_def = {[HP_CMD_PROFILE] = "3"},
                      .cmds = IN(TIME) | IN(PROFILE),
                      .offset = OFF(steps),
                      .help = "timed steps (after the warm-up); profile: the median of N"},
    [HP_OPT_WARMUP] = {.flag = "warmup",
                       .type = HP_OT_INT,
                       .arg = "N",
                       .min = 0,
                       .max = 1000,
                       .def = "3",
                       .cmds = IN(TIME),
                       .offset = OFF(warmup),
                       .help = "untimed steps first"},
    [HP_OPT_OP_PROFILE] = {.flag = "profile",
                           .type = HP_OT_FLAG,
                           .cmds = IN(TIME),
                           .offset = OFF(op_profile),
                           .help = "also time every op type and unit (GFLOP/s)"},
    [HP_OPT_TYPE] = {.flag = "type",
                     .type = HP_OT_TEXT,
                     .arg = "GPUTYPE",
                     .cmds = IN(PROFILE),
                     .offset = OFF(type),
                     .help = "the site config's GPU type the numbers stand for (default: the "
                             "device's name, or cpu)"},

    [HP_OPT_REQUIRE_GPU] = {.flag = "require-gpu",
                            .type = HP_OT_FLAG,
                            .cmds = IN(DOCTOR),
                            .offset = OFF(require_gpu),
                            .help = "no usable CUDA device is a FAIL, not a skip"},
    [HP_OPT_NO_SLURM] = {.flag = "no-slurm",
                         .type = HP_OT_FLAG,
                         .cmds = IN(DOCTOR),
                         .offset = OFF(no_slurm),
                         .help = "skip the Slurm checks (plugin, controller, srun's PMIx)"},
};

int hp_opt_is_job(enum hp_opt o)
{
    return (unsigned)o < HP_OPT_COUNT && hp_opts[o].env != NULL;
}

int hp_opt_find(const char *name, enum hp_cmd cmd)
{
    for (int o = 0; o < HP_OPT_COUNT; o++)
        if ((hp_opts[o].cmds & (1u << cmd)) && strcmp(name, hp_opts[o].flag) == 0)
            return o;
    return -1;
}

const char *hp_opt_default(enum hp_opt o, enum hp_cmd cmd)
{
    const struct hp_opt_info *r = &hp_opts[o];

    return (unsigned)cmd < HP_CMD_COUNT && r->cmd_def[cmd] ? r->cmd_def[cmd] : r->def;
}

const char *hp_opt_word(enum hp_opt o, long v)
{
    const char *const *w = hp_opts[o].words;

    for (long i = 0; w && w[i]; i++)
        if (i == v)
            return w[i];
    return "?";
}

void hp_optlimits_init(struct hp_optlimits *l, int site)
{
    memset(l, 0, sizeof(*l));
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        const struct hp_opt_info *r = &hp_opts[o];
        l->max[o] = site && r->site_max > 0 ? r->site_max : r->max;
        l->words[o] = ~0u;
    }
    snprintf(l->models_dir, sizeof(l->models_dir), "%s", MODELS_DIR);
    snprintf(l->config, sizeof(l->config), "%s", CONFIG_PATH);
}

/* The words of option o that l allows, ", "-separated. */
static void word_list(enum hp_opt o, unsigned mask, char *buf, size_t n)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int i = 0; hp_opts[o].words[i]; i++) {
        if (!(mask & (1u << i)))
            continue;
        int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", hp_opts[o].words[i]);
        if (w < 0 || (size_t)w >= n - len)
            return;
        len += (size_t)w;
    }
}

void hp_opt_allowed(enum hp_opt o, const struct hp_optlimits *l, char *buf, size_t n)
{
    const struct hp_opt_info *r = &hp_opts[o];
    const double max = l ? l->max[o] : r->max;
    char words[128] = "";

    if (n == 0)
        return;
    for (int i = 0; r->special && r->special[i].word; i++)
        snprintf(words + strlen(words), sizeof(words) - strlen(words), "%s, ", r->special[i].word);
    if (words[0]) /* "auto, off, " -> "auto, off or " */
        memcpy(words + strlen(words) - 2, " or ", 5);
    switch (r->type) {
    case HP_OT_INT:
        snprintf(buf, n, "%san integer from %.0f to %.0f", words, r->min, max);
        break;
    case HP_OT_REAL:
        snprintf(buf, n, "%sa number from %g to %g", words, r->min, max);
        break;
    case HP_OT_WORD:
        word_list(o, l ? l->words[o] : ~0u, buf, n);
        break;
    case HP_OT_MODEL:
        snprintf(buf, n,
                 "a model name (letters, digits, '_', '.', '-') from %s, or a path to an .ini "
                 "file",
                 l ? l->models_dir : MODELS_DIR);
        break;
    case HP_OT_TEXT:
        snprintf(buf, n, "a non-empty %s", r->arg ? r->arg : "value");
        break;
    case HP_OT_FLAG:
        snprintf(buf, n, "given without a value");
        break;
    }
}

static int is_model_path(const char *v)
{
    size_t len = strlen(v);

    return strchr(v, '/') || (len > 4 && strcmp(v + len - 4, ".ini") == 0);
}

static int is_model_file(const struct dirent *e)
{
    size_t nl = strlen(e->d_name);

    return nl > 4 && e->d_name[0] != '.' && strcmp(e->d_name + nl - 4, ".ini") == 0;
}

/* The models of dir in name order ("cnn, mlp"), cut with "..." to fit n >= 8 bytes; "none"
 * if there are none. */
static void model_list(const char *dir, char *buf, size_t n)
{
    struct dirent **names = NULL;
    int nn = scandir(dir, &names, is_model_file, alphasort);
    size_t len = 0;
    int cut = 0;

    buf[0] = '\0';
    for (int i = 0; i < nn; i++) {
        size_t nl = strlen(names[i]->d_name) - 4;
        if (!cut && len + 2 + nl + 4 < n) {
            len += (size_t)snprintf(buf + len, n - len, "%s%.*s", len ? ", " : "", (int)nl,
                                    names[i]->d_name);
        } else if (!cut) {
            snprintf(buf + len, n - len, "%s...", len ? ", " : "");
            cut = 1;
        }
        free(names[i]);
    }
    free(names);
    if (!buf[0])
        snprintf(buf, n, "none");
}

static int check_model(const char *what, const char *v, const struct hp_optlimits *l,
                       int check_files, const char *allowed, char *err, size_t errlen)
{
    const char *dir = l ? l->models_dir : MODELS_DIR;
    char path[2048];
    struct stat st;

    if (!is_model_path(v)) {
        if (strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") !=
            strlen(v)) {
            snprintf(err, errlen, "%s=%s: not a model name; must be %s", what, v, allowed);
            return -1;
        }
        if (!check_files)
            return 0;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s.ini", dir, v) >= sizeof(path) ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode) || access(path, R_OK) != 0) {
            char known[512];
            model_list(dir, known, sizeof(known));
            snprintf(err, errlen,
                     "%s=%s: unknown model: no %s.ini in %s (models there: %s); give a model "
                     "name from there, or a path to an .ini file",
                     what, v, v, dir, known);
            return -1;
        }
        return 0;
    }
    if (!check_files)
        return 0;
    if (stat(v, &st) != 0 || access(v, R_OK) != 0) {
        snprintf(err, errlen, "%s=%s: cannot read the model file: %s", what, v, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s=%s: the model file is not a regular file", what, v);
        return -1;
    }
    return 0;
}

union value {
    long i;
    double d;
    const char *s;
};

/* A number (or special word) for an INT or REAL row. */
static int parse_number(const struct hp_opt_info *r, double max, const char *v, union value *out)
{
    for (int i = 0; r->special && r->special[i].word; i++)
        if (strcmp(v, r->special[i].word) == 0) {
            if (r->type == HP_OT_INT)
                out->i = (long)r->special[i].value;
            else
                out->d = r->special[i].value;
            return 0;
        }
    if (r->type == HP_OT_INT)
        return hp_parse_long(v, (long)r->min, (long)max, &out->i) ? -1 : 0;
    return hp_parse_double(v, r->min, max, &out->d) ? -1 : 0;
}

static int parse(enum hp_opt o, const char *what, const char *v, const struct hp_optlimits *l,
                 int check_files, union value *out, char *err, size_t errlen)
{
    const struct hp_opt_info *r = &hp_opts[o];
    char allowed[1200];

    if (errlen)
        err[0] = '\0';
    if (r->type == HP_OT_FLAG) {
        if (!v || !*v || strcmp(v, "1") == 0) {
            out->i = 1;
            return 0;
        }
        snprintf(err, errlen, "%s=%s: takes no value", what, v);
        return -1;
    }
    if (!v) {
        snprintf(err, errlen, "%s: needs a value", what);
        return -1;
    }
    hp_opt_allowed(o, l, allowed, sizeof(allowed));
    if (!*v) {
        snprintf(err, errlen, "%s=: empty; must be %s", what, allowed);
        return -1;
    }
    switch (r->type) {
    case HP_OT_INT:
    case HP_OT_REAL:
        if (parse_number(r, l ? l->max[o] : r->max, v, out) == 0)
            return 0;
        snprintf(err, errlen, "%s=%s: must be %s", what, v, allowed);
        return -1;
    case HP_OT_WORD:
        for (int i = 0; r->words[i]; i++) {
            if (strcmp(v, r->words[i]) != 0)
                continue;
            if (l && !(l->words[o] & (1u << i))) {
                snprintf(err, errlen, "%s=%s: %s not allowed on this cluster; allowed: %s", what, v,
                         r->flag, allowed);
                return -1;
            }
            out->i = i;
            return 0;
        }
        snprintf(err, errlen, "%s=%s: unknown %s; allowed: %s", what, v, r->flag, allowed);
        return -1;
    case HP_OT_MODEL:
        if (check_model(what, v, l, check_files, allowed, err, errlen))
            return -1;
        out->s = v;
        return 0;
    default:
        out->s = v;
        return 0;
    }
}

int hp_opt_check(enum hp_opt o, const char *what, const char *value, const struct hp_optlimits *l,
                 int check_files, char *err, size_t errlen)
{
    union value v;

    if ((unsigned)o >= HP_OPT_COUNT) {
        snprintf(err, errlen, "%s: not a hetpipe option", what);
        return -1;
    }
    return parse(o, what, value, l, check_files, &v, err, errlen);
}

int hp_opt_set(struct hp_options *opts, enum hp_opt o, const char *what, const char *value,
               const struct hp_optlimits *l, int check_files, char *err, size_t errlen)
{
    union value v;
    char *field;

    if ((unsigned)o >= HP_OPT_COUNT) {
        snprintf(err, errlen, "%s: not a hetpipe option", what);
        return -1;
    }
    if (parse(o, what, value, l, check_files, &v, err, errlen))
        return -1;
    field = (char *)opts + hp_opts[o].offset;
    switch (hp_opts[o].type) {
    case HP_OT_REAL:
        memcpy(field, &v.d, sizeof(v.d));
        break;
    case HP_OT_TEXT:
    case HP_OT_MODEL:
        memcpy(field, &v.s, sizeof(v.s));
        break;
    default:
        memcpy(field, &v.i, sizeof(v.i));
        break;
    }
    opts->given[o] = 1;
    return 0;
}

void hp_options_init(struct hp_options *o, enum hp_cmd cmd)
{
    char err[256];

    memset(o, 0, sizeof(*o));
    for (int i = 0; i < HP_OPT_COUNT; i++) {
        const char *d = hp_opt_default((enum hp_opt)i, cmd);
        if (d && *d && hp_opts[i].type != HP_OT_FLAG)
            hp_opt_set(o, (enum hp_opt)i, hp_opts[i].flag, d, NULL, 0, err, sizeof(err));
        o->given[i] = 0;
    }
}

/* The shortest %g form of x that reads back as x. */
static int format_real(double x, char *buf, size_t n)
{
    for (int digits = 6; digits <= 17; digits++) {
        int w = snprintf(buf, n, "%.*g", digits, x);
        if (w < 0 || (size_t)w >= n)
            return -1;
        if (strtod(buf, NULL) == x)
            return 0;
    }
    return 0;
}

int hp_opt_format(const struct hp_options *opts, enum hp_opt o, char *buf, size_t n)
{
    const struct hp_opt_info *r = &hp_opts[o];
    const char *field = (const char *)opts + r->offset;
    long i;
    double d;
    const char *s;

    if (!buf || n == 0)
        return -1;
    buf[0] = '\0';
    switch (r->type) {
    case HP_OT_REAL:
        memcpy(&d, field, sizeof(d));
        for (int k = 0; r->special && r->special[k].word; k++)
            if (d == r->special[k].value)
                return (size_t)snprintf(buf, n, "%s", r->special[k].word) < n ? 0 : -1;
        return format_real(d, buf, n);
    case HP_OT_TEXT:
    case HP_OT_MODEL:
        memcpy(&s, field, sizeof(s));
        if (!s)
            return 1;
        return (size_t)snprintf(buf, n, "%s", s) < n ? 0 : -1;
    case HP_OT_WORD:
        memcpy(&i, field, sizeof(i));
        return (size_t)snprintf(buf, n, "%s", hp_opt_word(o, i)) < n ? 0 : -1;
    case HP_OT_FLAG:
        memcpy(&i, field, sizeof(i));
        if (!i)
            return 1;
        return (size_t)snprintf(buf, n, "1") < n ? 0 : -1;
    default:
        memcpy(&i, field, sizeof(i));
        for (int k = 0; r->special && r->special[k].word; k++)
            if ((double)i == r->special[k].value)
                return (size_t)snprintf(buf, n, "%s", r->special[k].word) < n ? 0 : -1;
        return (size_t)snprintf(buf, n, "%ld", i) < n ? 0 : -1;
    }
}

/* ---- plugstack.conf arguments ---------------------------------------------------------- */

/* A job option's row from NAME as written after max_ or default_ ('_' for '-'), or -1. */
static int job_opt_named(const char *name, size_t len)
{
    for (int o = 0; o < HP_OPT_COUNT; o++) {
        const char *f = hp_opts[o].flag;
        size_t j;
        if (!hp_opt_is_job((enum hp_opt)o) || strlen(f) != len)
            continue;
        for (j = 0; j < len && (name[j] == f[j] || (name[j] == '_' && f[j] == '-')); j++)
            ;
        if (j == len)
            return o;
    }
    return -1;
}

/* policies=a,b,...: the mask, or -1 with err. */
static int parse_words(const char *arg, const char *list, enum hp_opt o, unsigned *out, char *err,
                       size_t errlen)
{
    unsigned mask = 0;
    const char *p = list;
    char all[128];

    word_list(o, ~0u, all, sizeof(all));
    while (1) {
        size_t len = strcspn(p, ",");
        int i;
        for (i = 0; hp_opts[o].words[i]; i++)
            if (strlen(hp_opts[o].words[i]) == len && strncmp(p, hp_opts[o].words[i], len) == 0)
                break;
        if (!hp_opts[o].words[i]) {
            snprintf(err, errlen,
                     "'%s': '%.*s' is not a %s; %ss= takes a comma-separated list of %s", arg,
                     (int)(len > 64 ? 64 : len), p, hp_opts[o].flag, hp_opts[o].flag, all);
            return -1;
        }
        mask |= 1u << i;
        if (!p[len])
            break;
        p += len + 1;
    }
    *out = mask;
    return 0;
}

static void known_args(char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "config, models");

    for (int o = 0; o < HP_OPT_COUNT && len < n; o++)
        if (hp_opt_is_job((enum hp_opt)o) && hp_opts[o].type == HP_OT_INT)
            len += (size_t)snprintf(buf + len, n - len, ", max_%s", hp_opts[o].flag);
    len += (size_t)snprintf(buf + len, n - len, ", policies");
    for (int o = 0; o < HP_OPT_COUNT && len < n; o++)
        if (hp_opt_is_job((enum hp_opt)o))
            len += (size_t)snprintf(buf + len, n - len, ", default_%s", hp_opts[o].flag);
}

static int limit_arg(struct hp_optlimits *l, const char *arg, int o, const char *val, char *err,
                     size_t errlen)
{
    long v;

    if (!val || hp_parse_long(val, (long)hp_opts[o].min, (long)hp_opts[o].max, &v)) {
        snprintf(err, errlen, "'%s': max_%s must be an integer from %.0f to %.0f", arg,
                 hp_opts[o].flag, hp_opts[o].min, hp_opts[o].max);
        return -1;
    }
    l->max[o] = (double)v;
    return 0;
}

static int default_arg(struct hp_optlimits *l, const char *arg, size_t klen, int o, const char *val,
                       char *err, size_t errlen)
{
    char what[64];

    if (!val) {
        snprintf(err, errlen, "'%s': needs a value (%.*s=VALUE)", arg, (int)klen, arg);
        return -1;
    }
    snprintf(what, sizeof(what), "%.*s", (int)klen, arg);
    /* the models directory is the site's, so a default NAME must be in it */
    if (hp_opt_check((enum hp_opt)o, what, val, l, 1, err, errlen))
        return -1;
    l->defaults[o] = val;
    return 0;
}

int hp_optlimits_arg(struct hp_optlimits *l, const char *arg, char *err, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    const char *val = eq ? eq + 1 : NULL;
    const size_t klen = eq ? (size_t)(eq - arg) : strlen(arg);
    char known[512];
    int o;

    if (errlen)
        err[0] = '\0';
#define KEY_IS(k) (klen == strlen(k) && strncmp(arg, (k), klen) == 0)
    if (KEY_IS("config") || KEY_IS("models")) {
        char *dst = KEY_IS("config") ? l->config : l->models_dir;
        if (!val || !*val) {
            snprintf(err, errlen, "'%s': needs a path (%.*s=PATH)", arg, (int)klen, arg);
            return -1;
        }
        if (strlen(val) >= sizeof(l->config)) {
            snprintf(err, errlen, "'%.*s=...': the path is longer than %zu bytes", (int)klen, arg,
                     sizeof(l->config) - 1);
            return -1;
        }
        snprintf(dst, sizeof(l->config), "%s", val);
        l->config_given |= KEY_IS("config");
        return 0;
    }
    if (KEY_IS("policies")) {
        unsigned mask;
        if (!val) {
            snprintf(err, errlen, "'%s': needs a list (policies=ed,hd)", arg);
            return -1;
        }
        if (parse_words(arg, val, HP_OPT_POLICY, &mask, err, errlen))
            return -1;
        l->words[HP_OPT_POLICY] = mask;
        return 0;
    }
#undef KEY_IS
    if (klen > 4 && strncmp(arg, "max_", 4) == 0 && (o = job_opt_named(arg + 4, klen - 4)) >= 0 &&
        hp_opts[o].type == HP_OT_INT)
        return limit_arg(l, arg, o, val, err, errlen);
    if (klen > 8 && strncmp(arg, "default_", 8) == 0 && (o = job_opt_named(arg + 8, klen - 8)) >= 0)
        return default_arg(l, arg, klen, o, val, err, errlen);
    known_args(known, sizeof(known));
    snprintf(err, errlen, "'%s': unknown argument; known: %s (each key=value)", arg, known);
    return -1;
}
