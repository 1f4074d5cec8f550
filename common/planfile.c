/* planfile.c - writing and reading plan files. */
#include "planfile.h"

#include "error.h"
#include "ini.h"
#include "log.h"
#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hp_planfile_write(FILE *f, const struct hp_plan *p, const struct hp_cluster *cl,
                      const struct hp_gpudb *db, const char *token)
{
    int rank = 0;

    fprintf(f, "; hetpipe plan: written by hetpipe plan; read by hetpipe launch and the ranks\n");
    fprintf(f, "[plan]\nversion = %d\nmodel = %s\ncluster = %s\nbatch = %d\nstaleness = %d\n",
            p->version, p->model, p->cluster, p->opts.batch, p->opts.staleness);
    fprintf(f, "policy = %s\ngrouping = %s\nplacement = %s\nnm_max = %d\nnm_fixed = %d\n",
            hp_policy_name(p->opts.policy), hp_policy_name(p->grouping),
            hp_placement_name(p->opts.placement), p->opts.nm_max, p->opts.nm_fixed);
    fprintf(f, "seed = %llu\ntoken = %s\nunits = %d\nvws = %d\nshards = %d\nranks = %d\n",
            (unsigned long long)p->opts.seed, token, p->nunits, p->nvws, p->nshards, p->nranks);
    fprintf(f,
            "rate = %.17g\nallreduce_s = %.17g\nwave_bytes_default = %.17g\n"
            "wave_bytes_local = %.17g\nunit_shard = ",
            p->rate, p->allreduce_s, p->wave_bytes[0], p->wave_bytes[1]);
    for (int u = 0; u < p->nunits; u++)
        fprintf(f, "%s%d", u ? "," : "", p->nshards ? p->unit_shard[u] : 0);
    fprintf(f, "\n");
    for (int n = 0; n < cl->nnodes; n++) {
        fprintf(f, "\n[node.%d]\nname = %s\ngpus = ", n, cl->nodes[n].name);
        for (int i = 0; i < cl->nodes[n].ngpus; i++)
            fprintf(f, "%s%s", i ? "," : "",
                    db->types[cl->gpus[cl->nodes[n].first_gpu + i].type].name);
        fprintf(f, "\n");
        int identity = 1;
        for (int i = 0; i < cl->nodes[n].ngpus; i++)
            identity &= cl->gpus[cl->nodes[n].first_gpu + i].index == i;
        for (int i = 0; !identity && i < cl->nodes[n].ngpus; i++)
            fprintf(f, "%s%d", i ? "," : "devices = ", cl->gpus[cl->nodes[n].first_gpu + i].index);
        if (!identity)
            fprintf(f, "\n");
    }
    for (int v = 0; v < p->nvws; v++) {
        const struct hp_vw_plan *vw = &p->vws[v];
        fprintf(f,
                "\n[vw.%d]\nnm = %d\nstages = %d\nrate = %.17g\nbottleneck_s = %.17g\n"
                "round_s = %.17g\n",
                v, vw->nm, vw->nstages, vw->rate, vw->bottleneck_s, vw->round_s);
        for (int s = 0; s < vw->nstages; s++) {
            const struct hp_stage_plan *st = &vw->stages[s];
            const struct hp_gpu *g = &cl->gpus[st->gpu];
            fprintf(f,
                    "\n[vw.%d.stage.%d]\nrank = %d\nnode = %d\ndevice = %d\ntype = %s\n"
                    "first_unit = %d\nend_unit = %d\nin_flight = %d\nfwd_s = %.17g\n"
                    "bwd_s = %.17g\nsend_s = %.17g\nsend_back_s = %.17g\nmemory = %.17g\n"
                    "capacity = %.17g\n",
                    v, s, rank++, g->node, g->index, db->types[g->type].name, st->u0, st->u1,
                    st->in_flight, st->fwd_s, st->bwd_s, st->send_s, st->send_back_s, st->memory,
                    st->capacity);
        }
    }
    for (int s = 0; s < p->nshards; s++)
        fprintf(f, "\n[ps.%d]\nrank = %d\nnode = %d\n", s, rank++, s);
    return ferror(f) ? -EIO : 0;
}

int hp_planfile_save(const char *path, const struct hp_plan *p, const struct hp_cluster *cl,
                     const struct hp_gpudb *db, const char *token)
{
    char tmp[4096];
    FILE *f;
    int fd, rc;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || !(f = fdopen(fd, "w"))) {
        rc = -errno;
        hp_error("cannot write plan file '%s': %s", tmp, hp_strerror(rc));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    rc = hp_planfile_write(f, p, cl, db, token);
    if (!rc && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        rc = -errno;
    if (fclose(f) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
    if (rc) {
        hp_error("cannot write plan file '%s': %s", path, hp_strerror(rc));
        unlink(tmp);
    }
    return rc;
}

static const char *const plan_keys[] = {"version",
                                        "model",
                                        "cluster",
                                        "batch",
                                        "staleness",
                                        "policy",
                                        "grouping",
                                        "placement",
                                        "nm_max",
                                        "nm_fixed",
                                        "seed",
                                        "token",
                                        "units",
                                        "vws",
                                        "shards",
                                        "ranks",
                                        "rate",
                                        "allreduce_s",
                                        "wave_bytes_default",
                                        "wave_bytes_local",
                                        "unit_shard",
                                        NULL};
static const char *const node_keys[] = {"name", "gpus", "devices", NULL};
static const char *const vw_keys[] = {"nm", "stages", "rate", "bottleneck_s", "round_s", NULL};
static const char *const stage_keys[] = {
    "rank",  "node",  "device", "type",        "first_unit", "end_unit", "in_flight",
    "fwd_s", "bwd_s", "send_s", "send_back_s", "memory",     "capacity", NULL};
static const char *const ps_keys[] = {"rank", "node", NULL};

#define BAD(...)                                                                                   \
    do {                                                                                           \
        hp_error(__VA_ARGS__);                                                                     \
        goto bad;                                                                                  \
    } while (0)

static int get_int(const struct hp_ini *ini, const char *sec, const char *key, long min, long max,
                   int *out)
{
    long v;

    if (hp_ini_get_long(ini, sec, key, 1, 0, min, max, &v))
        return -1;
    *out = (int)v;
    return 0;
}

static int get_dbl(const struct hp_ini *ini, const char *sec, const char *key, double *out)
{
    return hp_ini_get_double(ini, sec, key, 1, 0.0, 0.0, 1e300, out) ? -1 : 0;
}

/* Split a comma-separated list into at most max items (copied into buf). */
static int split_list(const char *s, char *buf, size_t bufsz, char **items, int max)
{
    int n = 0;
    char *save = NULL;

    snprintf(buf, bufsz, "%s", s);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max)
            return -1;
        while (*t == ' ')
            t++;
        items[n++] = t;
    }
    return n;
}

int hp_planfile_load(const char *path, const struct hp_gpudb *db, struct hp_plan *p,
                     struct hp_cluster *cl, char *token)
{
    struct hp_ini *ini = NULL;
    const char *v;
    char sec[64], *buf = NULL, **items = NULL;
    int rc, version, *rank_used = NULL, *gpu_used = NULL;
    long seed;

    memset(p, 0, sizeof(*p));
    memset(cl, 0, sizeof(*cl));
    rc = hp_ini_load(path, &ini);
    if (rc)
        return rc;
    rc = -HP_ECONFIG;
    if (!hp_ini_has_section(ini, "plan"))
        BAD("%s: not a plan file (no [plan] section)", path);
    if (get_int(ini, "plan", "version", 0, 1 << 30, &version))
        goto bad;
    if (version != HP_PLAN_VERSION)
        BAD("%s: plan file version %d is not supported (this hetpipe reads version %d; "
            "re-run hetpipe plan)",
            path, version, HP_PLAN_VERSION);
    p->version = version;
    if (hp_ini_check_keys(ini, "plan", plan_keys))
        goto bad;
    if (hp_ini_get_str(ini, "plan", "model", 1, NULL, &v))
        goto bad;
    snprintf(p->model, sizeof(p->model), "%s", v);
    if (hp_ini_get_str(ini, "plan", "cluster", 1, NULL, &v))
        goto bad;
    snprintf(p->cluster, sizeof(p->cluster), "%s", v);
    snprintf(cl->name, sizeof(cl->name), "%s", v);
    if (get_int(ini, "plan", "batch", 1, 1 << 20, &p->opts.batch) ||
        get_int(ini, "plan", "staleness", 0, 1 << 20, &p->opts.staleness) ||
        get_int(ini, "plan", "nm_max", 0, 1 << 20, &p->opts.nm_max) ||
        get_int(ini, "plan", "nm_fixed", 0, 1 << 20, &p->opts.nm_fixed) ||
        get_int(ini, "plan", "units", 1, 1 << 20, &p->nunits) ||
        get_int(ini, "plan", "vws", 1, 1 << 20, &p->nvws) ||
        get_int(ini, "plan", "shards", 0, 1 << 20, &p->nshards) ||
        get_int(ini, "plan", "ranks", 1, 1 << 24, &p->nranks) ||
        hp_ini_get_long(ini, "plan", "seed", 1, 0, 0, 0x7fffffffL, &seed) ||
        get_dbl(ini, "plan", "rate", &p->rate) ||
        get_dbl(ini, "plan", "allreduce_s", &p->allreduce_s) ||
        get_dbl(ini, "plan", "wave_bytes_default", &p->wave_bytes[0]) ||
        get_dbl(ini, "plan", "wave_bytes_local", &p->wave_bytes[1]))
        goto bad;
    p->opts.seed = (uint64_t)seed;
    if (hp_ini_get_str(ini, "plan", "policy", 1, NULL, &v) || hp_policy_parse(v, &p->opts.policy))
        BAD("%s: [plan]: key 'policy': expected np, ed, hd, auto or dp", path);
    if (hp_ini_get_str(ini, "plan", "grouping", 1, NULL, &v) || hp_policy_parse(v, &p->grouping))
        BAD("%s: [plan]: key 'grouping': expected np, ed, hd, auto or dp", path);
    if (hp_ini_get_str(ini, "plan", "placement", 1, NULL, &v) ||
        hp_placement_parse(v, &p->opts.placement))
        BAD("%s: [plan]: key 'placement': expected default or local", path);
    if (hp_ini_get_str(ini, "plan", "token", 1, NULL, &v))
        goto bad;
    if (strlen(v) != 32 || strspn(v, "0123456789abcdef") != 32)
        BAD("%s: [plan]: key 'token': '%s' is not 32 lower-case hex digits", path, v);
    snprintf(token, 33, "%s", v);

    /* nodes */
    for (int n = 0;; n++) {
        snprintf(sec, sizeof(sec), "node.%d", n);
        if (!hp_ini_has_section(ini, sec))
            break;
        cl->nnodes = n + 1;
    }
    if (cl->nnodes == 0)
        BAD("%s: no [node.0] section", path);
    cl->nodes = calloc((size_t)cl->nnodes, sizeof(*cl->nodes));
    cl->gpus = calloc(4096, sizeof(*cl->gpus));
    buf = malloc(65536);
    items = calloc(4096, sizeof(*items));
    if (!cl->nodes || !cl->gpus || !buf || !items) {
        rc = -HP_ENOMEM;
        goto bad;
    }
    for (int n = 0; n < cl->nnodes; n++) {
        snprintf(sec, sizeof(sec), "node.%d", n);
        if (hp_ini_check_keys(ini, sec, node_keys) || hp_ini_get_str(ini, sec, "name", 1, NULL, &v))
            goto bad;
        snprintf(cl->nodes[n].name, sizeof(cl->nodes[n].name), "%s", v);
        if (hp_ini_get_str(ini, sec, "gpus", 1, NULL, &v))
            goto bad;
        int k = split_list(v, buf, 65536, items, 4096 - cl->ngpus);
        if (k <= 0)
            BAD("%s: [%s]: key 'gpus': expected a comma-separated list of GPU types", path, sec);
        cl->nodes[n].first_gpu = cl->ngpus;
        cl->nodes[n].ngpus = k;
        for (int i = 0; i < k; i++) {
            int t = hp_gpudb_find(db, items[i]);
            if (t < 0)
                BAD("%s: [%s]: unknown GPU type '%s'", path, sec, items[i]);
            cl->gpus[cl->ngpus++] = (struct hp_gpu){.node = n, .index = i, .type = t};
        }
        if (hp_ini_has(ini, sec, "devices")) {
            hp_ini_get_str(ini, sec, "devices", 1, NULL, &v);
            int kd = split_list(v, buf, 65536, items, 4096);
            if (kd != k)
                BAD("%s: [%s]: key 'devices': %d entries for %d GPUs", path, sec, kd < 0 ? 0 : kd,
                    k);
            for (int i = 0; i < k; i++) {
                long d;
                if (hp_parse_long(items[i], 0, 4095, &d))
                    BAD("%s: [%s]: key 'devices': '%s' is not a device index 0..4095", path, sec,
                        items[i]);
                for (int j = 0; j < i; j++)
                    if (cl->gpus[cl->nodes[n].first_gpu + j].index == (int)d)
                        BAD("%s: [%s]: key 'devices': device %ld is given twice", path, sec, d);
                cl->gpus[cl->nodes[n].first_gpu + i].index = (int)d;
            }
        }
    }
    if (p->nshards > cl->nnodes)
        BAD("%s: [plan]: %d PS shards for %d nodes", path, p->nshards, cl->nnodes);

    /* placement */
    p->unit_shard = calloc((size_t)p->nunits, sizeof(int));
    p->vws = calloc((size_t)p->nvws, sizeof(*p->vws));
    rank_used = calloc((size_t)p->nranks, sizeof(int));
    gpu_used = calloc((size_t)cl->ngpus, sizeof(int));
    if (!p->unit_shard || !p->vws || !rank_used || !gpu_used) {
        rc = -HP_ENOMEM;
        goto bad;
    }
    if (hp_ini_get_str(ini, "plan", "unit_shard", 1, NULL, &v))
        goto bad;
    {
        int k = split_list(v, buf, 65536, items, 4096);
        if (k != p->nunits)
            BAD("%s: [plan]: key 'unit_shard': %d entries for %d units", path, k < 0 ? 0 : k,
                p->nunits);
        for (int u = 0; u < k; u++) {
            long x;
            if (hp_parse_long(items[u], 0, p->nshards ? p->nshards - 1 : 0, &x))
                BAD("%s: [plan]: key 'unit_shard': entry %d ('%s') is not a shard 0..%d", path, u,
                    items[u], p->nshards ? p->nshards - 1 : 0);
            p->unit_shard[u] = (int)x;
        }
    }

    /* VWs and stages */
    for (int w = 0; w < p->nvws; w++) {
        struct hp_vw_plan *vw = &p->vws[w];
        int next = 0;
        snprintf(sec, sizeof(sec), "vw.%d", w);
        if (!hp_ini_has_section(ini, sec))
            BAD("%s: [plan] says %d virtual workers but there is no [%s]", path, p->nvws, sec);
        if (hp_ini_check_keys(ini, sec, vw_keys) || get_int(ini, sec, "nm", 1, 1 << 20, &vw->nm) ||
            get_int(ini, sec, "stages", 1, HP_MAX_VW_GPUS, &vw->nstages) ||
            get_dbl(ini, sec, "rate", &vw->rate) ||
            get_dbl(ini, sec, "bottleneck_s", &vw->bottleneck_s) ||
            get_dbl(ini, sec, "round_s", &vw->round_s))
            goto bad;
        for (int s = 0; s < vw->nstages; s++) {
            struct hp_stage_plan *st = &vw->stages[s];
            int rank, node, dev, gi = -1;
            snprintf(sec, sizeof(sec), "vw.%d.stage.%d", w, s);
            if (!hp_ini_has_section(ini, sec))
                BAD("%s: [vw.%d] has %d stages but there is no [%s]", path, w, vw->nstages, sec);
            if (hp_ini_check_keys(ini, sec, stage_keys) ||
                get_int(ini, sec, "rank", 0, p->nranks - 1, &rank) ||
                get_int(ini, sec, "node", 0, cl->nnodes - 1, &node) ||
                get_int(ini, sec, "device", 0, 4095, &dev) ||
                get_int(ini, sec, "first_unit", 0, p->nunits - 1, &st->u0) ||
                get_int(ini, sec, "end_unit", 1, p->nunits, &st->u1) ||
                get_int(ini, sec, "in_flight", 1, 1 << 20, &st->in_flight) ||
                get_dbl(ini, sec, "fwd_s", &st->fwd_s) || get_dbl(ini, sec, "bwd_s", &st->bwd_s) ||
                get_dbl(ini, sec, "send_s", &st->send_s) ||
                get_dbl(ini, sec, "send_back_s", &st->send_back_s) ||
                get_dbl(ini, sec, "memory", &st->memory) ||
                get_dbl(ini, sec, "capacity", &st->capacity) ||
                hp_ini_get_str(ini, sec, "type", 1, NULL, &v))
                goto bad;
            for (int i = 0; i < cl->nodes[node].ngpus; i++)
                if (cl->gpus[cl->nodes[node].first_gpu + i].index == dev)
                    gi = cl->nodes[node].first_gpu + i;
            if (gi < 0)
                BAD("%s: [%s]: device %d, but node '%s' has no such GPU (it has %d)", path, sec,
                    dev, cl->nodes[node].name, cl->nodes[node].ngpus);
            if (strcmp(db->types[cl->gpus[gi].type].name, v) != 0)
                BAD("%s: [%s]: type '%s', but GPU %d of node '%s' is a %s", path, sec, v, dev,
                    cl->nodes[node].name, db->types[cl->gpus[gi].type].name);
            if (gpu_used[gi]++)
                BAD("%s: [%s]: GPU %d of node '%s' is used twice", path, sec, dev,
                    cl->nodes[node].name);
            if (rank_used[rank]++)
                BAD("%s: [%s]: rank %d is used twice", path, sec, rank);
            if (st->u0 != next || st->u1 <= st->u0)
                BAD("%s: [%s]: units %d..%d, but the stage must start at unit %d and hold at "
                    "least one",
                    path, sec, st->u0, st->u1 - 1, next);
            next = st->u1;
            st->gpu = gi;
            st->compute_s = st->fwd_s + st->bwd_s;
            st->transfer_s = st->send_s + st->send_back_s;
        }
        if (next != p->nunits)
            BAD("%s: [vw.%d]: units %d..%d are in no stage", path, w, next, p->nunits - 1);
        for (int s = 0; s < vw->nstages; s++)
            if (vw->stages[s].in_flight > vw->nm)
                BAD("%s: [vw.%d.stage.%d]: in_flight %d, more than the VW's Nm %d", path, w, s,
                    vw->stages[s].in_flight, vw->nm);
        /* WSP's clocks count waves: one wave size for the job (plan.c, eval_grouping) */
        if (p->nshards && vw->nm != p->vws[0].nm)
            BAD("%s: [vw.%d]: nm = %d, but [vw.0] has %d: with parameter servers every VW "
                "has the same Nm",
                path, w, vw->nm, p->vws[0].nm);
    }
    for (int s = 0; s < p->nshards; s++) {
        int rank, node;
        snprintf(sec, sizeof(sec), "ps.%d", s);
        if (!hp_ini_has_section(ini, sec))
            BAD("%s: [plan] says %d PS shards but there is no [%s]", path, p->nshards, sec);
        if (hp_ini_check_keys(ini, sec, ps_keys) ||
            get_int(ini, sec, "rank", 0, p->nranks - 1, &rank) ||
            get_int(ini, sec, "node", 0, cl->nnodes - 1, &node))
            goto bad;
        if (rank_used[rank]++)
            BAD("%s: [%s]: rank %d is used twice", path, sec, rank);
    }
    for (int r = 0; r < p->nranks; r++)
        if (!rank_used[r])
            BAD("%s: rank %d of %d has no role", path, r, p->nranks);
    /* no section the format does not know */
    for (int i = 0; i < hp_ini_nsections(ini); i++) {
        const char *s = hp_ini_section(ini, i);
        int a, b, n = 0;
        if (strcmp(s, "plan") == 0 || (sscanf(s, "node.%d%n", &a, &n) == 1 && !s[n]) ||
            (sscanf(s, "vw.%d.stage.%d%n", &a, &b, &n) == 2 && !s[n] && a < p->nvws &&
             b < p->vws[a].nstages) ||
            (sscanf(s, "vw.%d%n", &a, &n) == 1 && !s[n] && a < p->nvws) ||
            (sscanf(s, "ps.%d%n", &a, &n) == 1 && !s[n] && a < p->nshards))
            continue;
        BAD("%s: unknown or surplus section [%s]", path, s);
    }
    cl->intra_node_gbs = db->intra_node_gbs;
    cl->inter_node_gbs = db->inter_node_gbs;
    cl->intra_latency_us = db->intra_latency_us;
    cl->inter_latency_us = db->inter_latency_us;
    rc = 0;
bad:
    free(buf);
    free(items);
    free(rank_used);
    free(gpu_used);
    hp_ini_destroy(ini);
    if (rc) {
        hp_plan_release(p);
        free(cl->nodes);
        free(cl->gpus);
        cl->nodes = NULL;
        cl->gpus = NULL;
    }
    return rc;
}
