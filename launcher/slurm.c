/* slurm.c - the typed GPUs of a running job, from slurmctld through libslurm (slurm.h). The
 * only file that includes <slurm/slurm.h>; without libslurm (HP_HAVE_SLURM=0) discovery says
 * so and the rest still works. */
#include "slurm.h"

#include "error.h"
#include "ini.h"
#include "log.h"
#include "output.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if HP_HAVE_SLURM
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#endif

/* "0-1,3" (IDX's list) into idx[], at most max; the count, or -1. */
static int parse_idx(const char *s, size_t len, int *idx, int max)
{
    int n = 0;
    size_t i = 0;

    if (len == 0)
        return -1;
    while (i < len) {
        long a = 0, b;
        size_t d = i;
        while (i < len && isdigit((unsigned char)s[i]) && a <= 4095)
            a = a * 10 + (s[i++] - '0');
        if (i == d || a > 4095)
            return -1;
        b = a;
        if (i < len && s[i] == '-') {
            d = ++i;
            b = 0;
            while (i < len && isdigit((unsigned char)s[i]) && b <= 4095)
                b = b * 10 + (s[i++] - '0');
            if (i == d || b > 4095 || b < a)
                return -1;
        }
        for (long x = a; x <= b; x++) {
            if (n >= max)
                return -1;
            idx[n++] = (int)x;
        }
        if (i < len) {
            if (s[i] != ',' || i + 1 == len)
                return -1;
            i++;
        }
    }
    return n;
}

/* One GRES entry "NAME[:TYPE][:COUNT](IDX:LIST)" (len bytes at e) into n; 0 or -1 with err. */
static int parse_entry(const char *e, size_t len, struct hp_alloc_node *n, char *err, size_t errlen)
{
    const char *paren = memchr(e, '(', len);
    const size_t head = paren ? (size_t)(paren - e) : len;
    char name[32] = "", type[HP_GPU_TYPE_MAX] = "", count[16] = "";
    const char *c1 = memchr(e, ':', head), *c2 = NULL;
    int idx[HP_ALLOC_GPUS_MAX], nidx;
    long cnt;
    char *end;

    if (c1)
        c2 = memchr(c1 + 1, ':', head - (size_t)(c1 + 1 - e));
    snprintf(name, sizeof(name), "%.*s", (int)(c1 ? (size_t)(c1 - e) : head), e);
    if (strcmp(name, "gpu") != 0)
        return 0; /* mps, shard, other GRES: not ours */
    if (!c1) {
        snprintf(err, errlen,
                 "node %s: GRES '%.*s' has no GPU type: hetpipe needs typed GPUs "
                 "(Gres=gpu:TYPE:N in slurm.conf, Type= in gres.conf)",
                 n->name, (int)len, e);
        return -1;
    }
    if (c2) {
        snprintf(type, sizeof(type), "%.*s", (int)(c2 - c1 - 1), c1 + 1);
        snprintf(count, sizeof(count), "%.*s", (int)(head - (size_t)(c2 + 1 - e)), c2 + 1);
    } else {
        /* "gpu:2" (untyped, counted) or "gpu:titanv" (typed, count 1 implied) */
        snprintf(type, sizeof(type), "%.*s", (int)(head - (size_t)(c1 + 1 - e)), c1 + 1);
        if (type[0] && strspn(type, "0123456789") == strlen(type)) {
            snprintf(err, errlen,
                     "node %s: GRES '%.*s' has no GPU type: hetpipe needs typed GPUs "
                     "(Gres=gpu:TYPE:N in slurm.conf, Type= in gres.conf)",
                     n->name, (int)len, e);
            return -1;
        }
        snprintf(count, sizeof(count), "1");
    }
    if (!type[0] || strcmp(type, "(null)") == 0) {
        snprintf(err, errlen,
                 "node %s: GRES '%.*s' has no GPU type: hetpipe needs typed GPUs "
                 "(Gres=gpu:TYPE:N in slurm.conf, Type= in gres.conf)",
                 n->name, (int)len, e);
        return -1;
    }
    errno = 0;
    cnt = strtol(count, &end, 10);
    if (!count[0] || *end || errno || cnt < 0 || cnt > HP_ALLOC_GPUS_MAX) {
        snprintf(err, errlen, "node %s: GRES '%.*s': count '%s' is not 0..%d", n->name, (int)len, e,
                 count, HP_ALLOC_GPUS_MAX);
        return -1;
    }
    if (cnt == 0)
        return 0;
    if (!paren || len < (size_t)(paren - e) + 6 || strncmp(paren, "(IDX:", 5) != 0 ||
        e[len - 1] != ')') {
        snprintf(err, errlen,
                 "node %s: GRES '%.*s' lacks its device indices '(IDX:...)' (the job must be "
                 "running; slurm_load_job with SHOW_DETAIL)",
                 n->name, (int)len, e);
        return -1;
    }
    nidx = parse_idx(paren + 5, len - (size_t)(paren - e) - 6, idx, HP_ALLOC_GPUS_MAX);
    if (nidx != cnt) {
        snprintf(err, errlen, "node %s: GRES '%.*s': %s", n->name, (int)len, e,
                 nidx < 0 ? "the IDX list is not N, N-M, ... with indices 0..4095"
                          : "the IDX list does not have COUNT indices");
        return -1;
    }
    for (int i = 0; i < nidx; i++) {
        for (int j = 0; j < n->ngpus; j++)
            if (n->gpus[j].index == idx[i]) {
                snprintf(err, errlen, "node %s: GPU index %d appears twice in its GRES", n->name,
                         idx[i]);
                return -1;
            }
        if (n->ngpus >= HP_ALLOC_GPUS_MAX) {
            snprintf(err, errlen, "node %s: more than %d GPUs", n->name, HP_ALLOC_GPUS_MAX);
            return -1;
        }
        snprintf(n->gpus[n->ngpus].type, sizeof(n->gpus[0].type), "%s", type);
        n->gpus[n->ngpus++].index = idx[i];
    }
    return 0;
}

static int by_index(const void *a, const void *b)
{
    const struct hp_alloc_gpu *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

int hp_gres_detail_parse(const char *detail, struct hp_alloc_node *n, char *err, size_t errlen)
{
    const char *s = detail ? detail : "";
    size_t i = 0, start = 0;
    int depth = 0;

    n->ngpus = 0;
    /* entries are separated by commas outside parentheses (IDX lists have commas too) */
    for (;; i++) {
        const char ch = s[i];
        if (ch == '(')
            depth++;
        else if (ch == ')' && depth > 0)
            depth--;
        if ((ch == ',' && depth == 0) || ch == '\0') {
            if (i > start && parse_entry(s + start, i - start, n, err, errlen))
                return -1;
            start = i + 1;
        }
        if (ch == '\0')
            break;
    }
    if (depth != 0) {
        snprintf(err, errlen, "node %s: GRES '%s' has unbalanced parentheses", n->name, s);
        return -1;
    }
    qsort(n->gpus, (size_t)n->ngpus, sizeof(n->gpus[0]), by_index);
    return 0;
}

void hp_alloc_release(struct hp_alloc *a)
{
    if (!a)
        return;
    free(a->nodes);
    memset(a, 0, sizeof(*a));
}

/* A node name that a cluster file's section holds as it is: iniparser reads section names
 * trimmed and in lower case, and [cluster] is taken. */
static int plain_section(const char *name)
{
    if (!*name || strcmp(name, "cluster") == 0)
        return 0;
    for (const char *c = name; *c; c++)
        if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c) && !strchr("._-", *c))
            return 0;
    return 1;
}

/* A GPU type that a "gpus" item TYPE:COUNT holds as it is. */
static int plain_type(const char *type)
{
    if (!*type)
        return 0;
    for (const char *c = type; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("._+-", *c))
            return 0;
    return 1;
}

/* One node's section: [NAME], or [node.I] with name = NAME when `named`. */
static int write_node(FILE *f, const struct hp_alloc *a, int i, int named)
{
    const struct hp_alloc_node *n = &a->nodes[i];
    struct hp_ini_list l;
    char item[HP_GPU_TYPE_MAX + 16], err[512], what[128];

    if (named) {
        fprintf(f, "\n[node.%d]\n", i);
        snprintf(what, sizeof(what), "the name of node %d ('%.60s')", i, n->name);
        if (hp_ini_write_str(f, "name", n->name, what, err, sizeof(err))) {
            hp_error("cannot write the cluster file: %s", err);
            return -HP_EINVAL;
        }
    } else {
        fprintf(f, "\n[%s]\n", n->name);
    }
    if (a->hetjob)
        fprintf(f, "; hetjob component %d\n", n->component);
    hp_ini_list_begin(&l, f, "gpus");
    for (int g = 0; g < n->ngpus;) {
        int run = 1;
        if (!plain_type(n->gpus[g].type)) {
            hp_error("cannot write the cluster file: node %s: GPU type '%.60s' holds characters "
                     "other than letters, digits and '._+-'",
                     n->name, n->gpus[g].type);
            return -HP_EINVAL;
        }
        while (g + run < n->ngpus && strcmp(n->gpus[g + run].type, n->gpus[g].type) == 0)
            run++;
        snprintf(item, sizeof(item), "%s:%d", n->gpus[g].type, run);
        hp_ini_list_add(&l, item);
        g += run;
    }
    hp_ini_list_end(&l);
    hp_ini_list_begin(&l, f, "devices");
    for (int g = 0; g < n->ngpus; g++) {
        snprintf(item, sizeof(item), "%d", n->gpus[g].index);
        hp_ini_list_add(&l, item);
    }
    hp_ini_list_end(&l);
    return 0;
}

int hp_alloc_write_cluster(const struct hp_alloc *a, const char *name, const char *path)
{
    FILE *f = hp_out_open(path, "cluster description", 0666);
    char err[512];
    int named = 0, rc = 0;

    if (!f)
        return -HP_EIO;
    for (int i = 0; i < a->nnodes; i++)
        named |= !plain_section(a->nodes[i].name);
    fprintf(f, "; the GPUs Slurm allocated to job %lu (written by hetpipe launch)\n", a->jobid);
    fprintf(f, "[cluster]\n");
    if (hp_ini_write_str(f, "name", name, "the cluster's name", err, sizeof(err))) {
        hp_error("cannot write the cluster file: %s", err);
        rc = -HP_EINVAL;
    }
    for (int i = 0; i < a->nnodes && !rc; i++)
        rc = write_node(f, a, i, named);
    if (hp_out_close(f, rc == 0) && !rc)
        rc = -HP_EIO;
    return rc;
}

int hp_alloc_cluster(const struct hp_alloc *a, const struct hp_gpudb *db, const char *name,
                     struct hp_cluster *c)
{
    struct hp_cluster_node *nodes = calloc((size_t)(a->nnodes ? a->nnodes : 1), sizeof(*nodes));
    const char **types = calloc((size_t)a->nnodes * HP_ALLOC_GPUS_MAX + 1, sizeof(*types));
    int *devices = calloc((size_t)a->nnodes * HP_ALLOC_GPUS_MAX + 1, sizeof(*devices));
    char origin[64];
    int rc = -HP_ENOMEM;

    if (nodes && types && devices) {
        for (int i = 0; i < a->nnodes; i++) {
            const struct hp_alloc_node *n = &a->nodes[i];
            nodes[i] = (struct hp_cluster_node){.name = n->name,
                                                .ngpus = n->ngpus,
                                                .types = types + i * HP_ALLOC_GPUS_MAX,
                                                .devices = devices + i * HP_ALLOC_GPUS_MAX};
            for (int g = 0; g < n->ngpus; g++) {
                types[i * HP_ALLOC_GPUS_MAX + g] = n->gpus[g].type;
                devices[i * HP_ALLOC_GPUS_MAX + g] = n->gpus[g].index;
            }
        }
        snprintf(origin, sizeof(origin), "Slurm job %lu", a->jobid);
        rc = hp_cluster_build(db, name, origin, nodes, a->nnodes, c);
    } else {
        hp_error("out of memory describing the allocation of job %lu", a->jobid);
    }
    free(nodes);
    free(types);
    free(devices);
    return rc;
}

#if HP_HAVE_SLURM

/* Append the GPU nodes of one job record (one hetjob component) to a. */
static int add_record(const slurm_job_info_t *j, int component, struct hp_alloc *a)
{
    hostlist_t hl = slurm_hostlist_create(j->nodes ? j->nodes : "");
    char *host, err[512];
    uint32_t i = 0;
    int rc = 0;

    if (!hl) {
        hp_error("job %u: cannot expand its node list '%s'", j->job_id, j->nodes ? j->nodes : "");
        return -HP_ECONFIG;
    }
    while (rc == 0 && (host = slurm_hostlist_shift(hl)) != NULL) {
        struct hp_alloc_node n = {.component = component};
        snprintf(n.name, sizeof(n.name), "%s", host);
        free(host);
        if (i >= j->gres_detail_cnt) {
            a->nskipped++; /* no GRES detail for this node: no GRES at all */
            i++;
            continue;
        }
        if (hp_gres_detail_parse(j->gres_detail_str[i++], &n, err, sizeof(err))) {
            hp_error("job %u: %s", j->job_id, err);
            rc = -HP_ECONFIG;
            break;
        }
        if (n.ngpus == 0) {
            a->nskipped++;
            continue;
        }
        struct hp_alloc_node *grown = realloc(a->nodes, (size_t)(a->nnodes + 1) * sizeof(n));
        if (!grown) {
            rc = -HP_ENOMEM;
            break;
        }
        a->nodes = grown;
        a->nodes[a->nnodes++] = n;
    }
    slurm_hostlist_destroy(hl);
    return rc;
}

static int by_component(const void *x, const void *y)
{
    const slurm_job_info_t *a = *(const slurm_job_info_t *const *)x;
    const slurm_job_info_t *b = *(const slurm_job_info_t *const *)y;
    return (a->het_job_offset > b->het_job_offset) - (a->het_job_offset < b->het_job_offset);
}

int hp_slurm_discover(unsigned long jobid, struct hp_alloc *a)
{
    job_info_msg_t *msg = NULL;
    const slurm_job_info_t **recs = NULL;
    int rc = 0;

    memset(a, 0, sizeof(*a));
    a->jobid = jobid;
    if (jobid == 0 || jobid > 0xfffffff0ul) {
        hp_error("'%lu' is not a Slurm job id", jobid);
        return -HP_EINVAL;
    }
    slurm_init(NULL);
    if (slurm_load_job(&msg, (uint32_t)jobid, SHOW_DETAIL) != SLURM_SUCCESS || !msg) {
        const int e = slurm_get_errno();
        hp_error("cannot ask slurmctld about job %lu: %s", jobid, slurm_strerror(e));
        return e == ESLURM_INVALID_JOB_ID ? -HP_ENOTFOUND : -HP_EIO;
    }
    if (msg->record_count == 0) {
        hp_error("slurmctld knows no job %lu", jobid);
        rc = -HP_ENOTFOUND;
        goto out;
    }
    recs = calloc(msg->record_count, sizeof(*recs));
    if (!recs) {
        rc = -HP_ENOMEM;
        goto out;
    }
    for (uint32_t r = 0; r < msg->record_count; r++) {
        const slurm_job_info_t *j = &msg->job_array[r];
        if ((j->job_state & JOB_STATE_BASE) != JOB_RUNNING) {
            hp_error("job %u is not running: hetpipe launch runs inside a running allocation "
                     "(an sbatch script, or salloc)",
                     j->job_id);
            rc = -HP_EINVAL;
            goto out;
        }
        recs[r] = j;
    }
    a->hetjob = msg->record_count > 1 ||
                (msg->job_array[0].het_job_id != 0 && msg->job_array[0].het_job_id != NO_VAL);
    a->ncomponents = (int)msg->record_count;
    qsort(recs, msg->record_count, sizeof(*recs), by_component);
    for (uint32_t r = 0; rc == 0 && r < msg->record_count; r++)
        rc = add_record(recs[r], (int)r, a);
    if (rc == 0 && a->nnodes == 0) {
        hp_error("job %lu has no GPUs: ask for typed GPUs (e.g. --gpus-per-node=1, "
                 "--gres=gpu:TYPE:N)",
                 jobid);
        rc = -HP_EINVAL;
    }
out:
    free(recs);
    slurm_free_job_info_msg(msg);
    if (rc)
        hp_alloc_release(a);
    return rc;
}

int hp_slurm_kill_steps(unsigned long jobid, int sig)
{
    slurm_init(NULL);
    if (slurm_kill_job((uint32_t)jobid, (uint16_t)sig, KILL_STEPS_ONLY) != SLURM_SUCCESS) {
        hp_error("cannot signal the steps of job %lu: %s", jobid,
                 slurm_strerror(slurm_get_errno()));
        return -HP_EIO;
    }
    return 0;
}

#else

int hp_slurm_kill_steps(unsigned long jobid, int sig)
{
    (void)sig;
    hp_error("this hetpipe was built without libslurm: it cannot signal job %lu's steps", jobid);
    return -HP_EUNSUPPORTED;
}

int hp_slurm_discover(unsigned long jobid, struct hp_alloc *a)
{
    memset(a, 0, sizeof(*a));
    hp_error("this hetpipe was built without libslurm (install libslurm-dev and rebuild): it "
             "cannot discover job %lu's GPUs",
             jobid);
    return -HP_EUNSUPPORTED;
}

#endif
