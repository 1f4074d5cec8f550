/* main.c - the `hetpipe` command: one dispatch point for its subcommands (commands.h). */
#include "backend.h"
#include "backend_module.h"
#include "cli.h"
#include "commands.h"
#include "error.h"
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define VERSION "0.1.0"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"train", hp_cmd_train, "train a model in one process (Fashion-MNIST, an image folder or shards)"},
    {"model", hp_cmd_model, "show a model's units, parameters and multiply-adds"},
    {"time", hp_cmd_time, "time training steps of a model on random data"},
    {"plan", hp_cmd_plan, "plan virtual workers, stages and parameter placement for a cluster"},
    {"profile", hp_cmd_profile,
     "measure every unit's forward/backward time and memory on this device"},
    {"run", hp_cmd_run, "run a job: --local forks its ranks here, emulating the GPU types"},
    {"launch", hp_cmd_launch, "inside a Slurm allocation: discover its GPUs, plan, srun the ranks"},
    {"doctor", hp_cmd_doctor, "check this installation and say what to fix"},
    {"report", hp_cmd_report_html,
     "write an HTML page about a finished job from its run directory"},
    {"timeline", hp_cmd_timeline, "merge a job's timeline (--timeline) into one Chrome trace"},
    {"data", hp_cmd_data, "check a data set (classes, counts, images); pack a folder into shards"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The version, and where the CUDA backend module is (found, not loaded: the programs link no
 * CUDA library, runtime/backend_module.h). */
static void version(void)
{
    char path[PATH_MAX], searched[3 * PATH_MAX + 64];

    if (hp_backend_module_find(path, sizeof(path), searched, sizeof(searched)) == 0)
        printf("hetpipe %s (cuda backend: %s)\n", VERSION, path);
    else
        printf("hetpipe %s (cuda backend: none; %s not found in %s)\n", VERSION,
               HP_BACKEND_CUDA_FILE, searched);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: hetpipe <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-8s %s\n\n'hetpipe <command> --help' shows a command's options.\n", "version",
            "print the version");
}

int hp_cmd_options(enum hp_cmd cmd, const char *synopsis, int argc, char **argv,
                   struct hp_options *o, int args, int *rest)
{
    int first = argc, rc;

    hp_options_init(o, cmd);
    rc = hp_cli_parse(cmd, synopsis, argc, argv, o, &first);
    if (rc)
        return rc > 0 ? 0 : 2;
    if (!args && first < argc) {
        hp_error("%s: unexpected argument '%s' (see hetpipe %s --help)", hp_cli_name(cmd),
                 argv[first], hp_cli_name(cmd));
        return 2;
    }
    if (o->threads)
        hp_backend_cpu_set_threads((int)o->threads);
    if (rest)
        *rest = first;
    return -1;
}

void hp_cmd_report(const char *cmd, int rc)
{
    if (rc == -HP_ENOMEM || rc == -ENOMEM || rc == -HP_EIO)
        hp_error("%s failed: %s", cmd, hp_strerror(rc));
}

int main(int argc, char **argv)
{
    const char *cmd;
    char list[256] = "";

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        version();
        return 0;
    }
    argv[1] = argv[0];
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s, ", commands[i].name);
    }
    hp_error("unknown command '%s' (allowed: %sversion; see hetpipe --help)", cmd, list);
    return 2;
}
