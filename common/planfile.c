/* planfile.c - writing and reading plan files (planfile.h). */
#include "planfile.h"

#include "error.h"
#include "ini.h"
#include "log.h"
#include "output.h"
#include "options.h"
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PLAN_GPUS 65536 /* the most GPUs of a cluster (cluster.c) */

/* "key = value" that reads back as value, or an error naming what cannot be written. */
static int write_str(FILE *f, const char *key, const char *value, const char *what)
{
    char err[512];

    if (hp_ini_write_str(f, key, value, what, err, sizeof(err)) == 0)
        return 0;
    hp_error("cannot write the plan: %s", err);
    return -HP_EINVAL;
}

/* The [plan] keys that are options: every row with a plan key, formatted from p->opts. */
static int write_options(FILE *f, const struct hp_plan *p)
{
    struct hp_options o = p->opts;
    char v[4200], what[256];

    o.model = p->model;
    for (int i = 0; i < HP_OPT_COUNT; i++) {
        if (!hp_opts[i].plan_key || hp_opt_format(&o, (enum hp_opt)i, v, sizeof(v)) != 0)
            continue;
        snprintf(what, sizeof(what), "the %s ('%.80s%s')", hp_opts[i].plan_key, v,
                 strlen(v) > 80 ? "..." : "");
        if (write_str(f, hp_opts[i].plan_key, v, what))
            return -HP_EINVAL;
    }
    return 0;
}

static int write_nodes(FILE *f, const struct hp_cluster *cl, const struct hp_gpudb *db)
{
    for (int n = 0; n < cl->nnodes; n++) {
        const struct hp_node *nd = &cl->nodes[n];
        struct hp_ini_list l;
        char what[256], item[16];
        int identity = 1;
        snprintf(what, sizeof(what), "the name of node %d ('%.80s')", n, nd->name);
        fprintf(f, "\n[node.%d]\n", n);
        if (write_str(f, "name", nd->name, what))
            return -HP_EINVAL;
        hp_ini_list_begin(&l, f, "gpus");
        for (int i = 0; i < nd->ngpus; i++) {
            hp_ini_list_add(&l, db->types[cl->gpus[nd->first_gpu + i].type].name);
            identity &= cl->gpus[nd->first_gpu + i].index == i;
        }
        hp_ini_list_end(&l);
        if (identity)
            continue;
        hp_ini_list_begin(&l, f, "devices");
        for (int i = 0; i < nd->ngpus; i++) {
            snprintf(item, sizeof(item), "%d", cl->gpus[nd->first_gpu + i].index);
            hp_ini_list_add(&l, item);
        }
        hp_ini_list_end(&l);
    }
    return 0;
}

int hp_planfile_write(FILE *f, const struct hp_plan *p, const struct hp_cluster *cl,
                      const struct hp_gpudb *db, const char *token)
{
    struct hp_ini_list l;
    char item[16];
    int rank = 0;

    fprintf(f, "; hetpipe plan: written by hetpipe plan; read by hetpipe launch and the ranks\n");
    fprintf(f, "[plan]\nversion = %d\n", p->version);
    if (write_str(f, "cluster", p->cluster, "the cluster's name") || write_options(f, p))
        return -HP_EINVAL;
    fprintf(f, "grouping = %s\ntoken = %s\nunits = %d\nvws = %d\nshards = %d\nranks = %d\n",
            hp_policy_name(p->grouping), token, p->nunits, p->nvws, p->nshards, p->nranks);
    fprintf(f,
            "rate = %.17g\nallreduce_s = %.17g\nwave_bytes_default = %.17g\n"
            "wave_bytes_local = %.17g\n",
            p->rate, p->allreduce_s, p->wave_bytes[0], p->wave_bytes[1]);
    hp_ini_list_begin(&l, f, "unit_shard");
    for (int u = 0; u < p->nunits; u++) {
        snprintf(item, sizeof(item), "%d", p->nshards ? p->unit_shard[u] : 0);
        hp_ini_list_add(&l, item);
    }
    hp_ini_list_end(&l);
    if (write_nodes(f, cl, db))
        return -HP_EINVAL;
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
                    "capacity = %.17g\nrecompute = %d\n",
                    v, s, rank++, g->node, g->index, db->types[g->type].name, st->u0, st->u1,
                    st->in_flight, st->fwd_s, st->bwd_s, st->send_s, st->send_back_s, st->memory,
                    st->capacity, st->recompute);
        }
    }
    for (int s = 0; s < p->nshards; s++)
        fprintf(f, "\n[ps.%d]\nrank = %d\nnode = %d\n", s, rank++, s);
    return ferror(f) ? -EIO : 0;
}

int hp_planfile_save(const char *path, const struct hp_plan *p, const struct hp_cluster *cl,
                     const struct hp_gpudb *db, const char *token)
{
    FILE *f = hp_out_open(path, "plan", 0600) /* it holds the job token */;
    int rc;

    if (!f)
        return -HP_EIO;
    rc = hp_planfile_write(f, p, cl, db, token);
    if (rc)
        hp_error("cannot write the plan to '%s': %s", path, hp_strerror(rc));
    const int crc = hp_out_close(f, !rc);
    return rc ? rc : crc;
}

/* ---- reading ------------------------------------------------------------------------------ */

/* A plan being read: the file, and what the checks across sections need. */
struct reader {
    const char *path;
    struct hp_ini *ini;
    const struct hp_gpudb *db;
    struct hp_plan *p;
    struct hp_cluster *cl;
    char *buf;    /* the list being split (hp_ini_get_list's) */
    char **items; /* its items */
    int *rank_used, *gpu_used;
};

/* The [plan] keys that are not options (those are the table's rows with a plan key). */
static const char *const fixed_keys[] = {"version",
                                         "cluster",
                                         "grouping",
                                         "token",
                                         "units",
                                         "vws",
                                         "shards",
                                         "ranks",
                                         "rate",
                                         "allreduce_s",
                                         "wave_bytes_default",
                                         "wave_bytes_local",
                                         "unit_shard+",
                                         NULL};
#define NFIXED (sizeof(fixed_keys) / sizeof(fixed_keys[0]) - 1)
static const char *const node_keys[] = {"name", "gpus+", "devices+", NULL};
static const char *const vw_keys[] = {"nm", "stages", "rate", "bottleneck_s", "round_s", NULL};
static const char *const stage_keys[] = {
    "rank",  "node",   "device",      "type",   "first_unit", "end_unit",  "in_flight", "fwd_s",
    "bwd_s", "send_s", "send_back_s", "memory", "capacity",   "recompute", NULL};
static const char *const ps_keys[] = {"rank", "node", NULL};

#define BAD(...)                                                                                   \
    do {                                                                                           \
        hp_error(__VA_ARGS__);                                                                     \
        return -HP_ECONFIG;                                                                        \
    } while (0)

static int get_int(const struct reader *r, const char *sec, const char *key, long min, long max,
                   int *out)
{
    long v;

    if (hp_ini_get_long(r->ini, sec, key, 1, 0, min, max, &v))
        return -1;
    *out = (int)v;
    return 0;
}

static int get_dbl(const struct reader *r, const char *sec, const char *key, double *out)
{
    return hp_ini_get_double(r->ini, sec, key, 1, 0.0, 0.0, 1e300, out) ? -1 : 0;
}

/* The list key `key` of `sec` (continuations joined) split at commas into r->items (at most
 * max); the count, -1 for more than max, or -2 after an error (absent, memory). */
static int split_list(struct reader *r, const char *sec, const char *key, int max)
{
    int n = 0;
    char *save = NULL;
    size_t commas = 1;

    free(r->buf);
    free(r->items);
    r->items = NULL;
    if (hp_ini_get_list(r->ini, sec, key, 1, &r->buf))
        return -2;
    for (const char *c = r->buf; *c; c++)
        commas += *c == ',';
    if (!(r->items = calloc(commas, sizeof(*r->items)))) {
        hp_error("%s: out of memory reading the plan", r->path);
        return -2;
    }
    for (char *t = strtok_r(r->buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max)
            return -1;
        while (*t == ' ')
            t++;
        r->items[n++] = t;
    }
    return n;
}

/* Every key [plan] may have: the fixed ones, then the rows' plan keys; NULL-terminated. */
static void plan_keys(const char **keys)
{
    size_t n = 0;

    for (size_t i = 0; i < NFIXED; i++)
        keys[n++] = fixed_keys[i];
    for (int i = 0; i < HP_OPT_COUNT; i++)
        if (hp_opts[i].plan_key)
            keys[n++] = hp_opts[i].plan_key;
    keys[n] = NULL;
}

/* The [plan] keys that are options, through the options table (its hard limits), into
 * p->opts (the others their defaults); a key that came later (HP_OPTF_PLAN_OPTIONAL) may be
 * absent: its default. */
static int read_options(struct reader *r)
{
    struct hp_options *o = &r->p->opts, scratch;
    char what[4200], err[2048];
    const char *v;

    hp_options_init(o, HP_CMD_PLAN);
    for (int i = 0; i < HP_OPT_COUNT; i++) {
        if (!hp_opts[i].plan_key)
            continue;
        const int required = !(hp_opts[i].flags & HP_OPTF_PLAN_OPTIONAL);
        if (hp_ini_get_str(r->ini, "plan", hp_opts[i].plan_key, required, hp_opts[i].def, &v))
            return -HP_ECONFIG;
        snprintf(what, sizeof(what), "%s: [plan]: %s", r->path, hp_opts[i].plan_key);
        if (hp_opt_set(o, (enum hp_opt)i, what, v, NULL, 0, err, sizeof(err)))
            BAD("%s", err);
    }
    snprintf(r->p->model, sizeof(r->p->model), "%s", o->model);
    o->model = NULL; /* it pointed into the file: the plan's model is p->model */
    memset(o->given, 0, sizeof(o->given));
    if (hp_ini_get_str(r->ini, "plan", "grouping", 1, NULL, &v))
        return -HP_ECONFIG;
    snprintf(what, sizeof(what), "%s: [plan]: grouping", r->path);
    hp_options_init(&scratch, HP_CMD_PLAN);
    if (hp_opt_set(&scratch, HP_OPT_POLICY, what, v, NULL, 0, err, sizeof(err)))
        BAD("%s", err);
    r->p->grouping = (enum hp_policy)scratch.policy;
    return 0;
}

static int read_header(struct reader *r, char *token)
{
    struct hp_plan *p = r->p;
    const char *keys[NFIXED + HP_OPT_COUNT + 1], *v;
    int version;

    if (!hp_ini_has_section(r->ini, "plan"))
        BAD("%s: not a plan file (no [plan] section)", r->path);
    if (get_int(r, "plan", "version", 0, 1 << 30, &version))
        return -HP_ECONFIG;
    if (version != HP_PLAN_VERSION)
        BAD("%s: plan file version %d is not supported (this hetpipe reads version %d; "
            "re-run hetpipe plan)",
            r->path, version, HP_PLAN_VERSION);
    p->version = version;
    plan_keys(keys);
    if (hp_ini_check_keys(r->ini, "plan", keys) || read_options(r) ||
        hp_ini_get_str(r->ini, "plan", "cluster", 1, NULL, &v))
        return -HP_ECONFIG;
    snprintf(p->cluster, sizeof(p->cluster), "%s", v);
    snprintf(r->cl->name, sizeof(r->cl->name), "%s", v);
    if (get_int(r, "plan", "units", 1, 1 << 20, &p->nunits) ||
        get_int(r, "plan", "vws", 1, 1 << 20, &p->nvws) ||
        get_int(r, "plan", "shards", 0, 1 << 20, &p->nshards) ||
        get_int(r, "plan", "ranks", 1, 1 << 24, &p->nranks) ||
        get_dbl(r, "plan", "rate", &p->rate) ||
        get_dbl(r, "plan", "allreduce_s", &p->allreduce_s) ||
        get_dbl(r, "plan", "wave_bytes_default", &p->wave_bytes[0]) ||
        get_dbl(r, "plan", "wave_bytes_local", &p->wave_bytes[1]) ||
        hp_ini_get_str(r->ini, "plan", "token", 1, NULL, &v))
        return -HP_ECONFIG;
    if (strlen(v) != 32 || strspn(v, "0123456789abcdef") != 32)
        BAD("%s: [plan]: key 'token': '%s' is not 32 lower-case hex digits", r->path, v);
    snprintf(token, 33, "%s", v);
    return 0;
}

/* A node's optional devices: distinct indices, one per GPU. */
static int read_devices(struct reader *r, const char *sec, int n, int k)
{
    int kd;

    if (!hp_ini_has(r->ini, sec, "devices"))
        return 0;
    kd = split_list(r, sec, "devices", MAX_PLAN_GPUS);
    if (kd == -2)
        return -HP_ECONFIG;
    if (kd != k)
        BAD("%s: [%s]: key 'devices': %d entries for %d GPUs", r->path, sec, kd < 0 ? 0 : kd, k);
    for (int i = 0; i < k; i++) {
        struct hp_gpu *g = &r->cl->gpus[r->cl->nodes[n].first_gpu];
        long d;
        if (hp_parse_long(r->items[i], 0, 4095, &d))
            BAD("%s: [%s]: key 'devices': '%s' is not a device index 0..4095", r->path, sec,
                r->items[i]);
        for (int j = 0; j < i; j++)
            if (g[j].index == (int)d)
                BAD("%s: [%s]: key 'devices': device %ld is given twice", r->path, sec, d);
        g[i].index = (int)d;
    }
    return 0;
}

static int read_nodes(struct reader *r)
{
    struct hp_cluster *cl = r->cl;
    char sec[64];
    const char *v;

    while (snprintf(sec, sizeof(sec), "node.%d", cl->nnodes), hp_ini_has_section(r->ini, sec))
        cl->nnodes++;
    if (cl->nnodes == 0)
        BAD("%s: no [node.0] section", r->path);
    cl->nodes = calloc((size_t)cl->nnodes, sizeof(*cl->nodes));
    cl->gpus = calloc(MAX_PLAN_GPUS, sizeof(*cl->gpus));
    if (!cl->nodes || !cl->gpus)
        return -HP_ENOMEM;
    for (int n = 0; n < cl->nnodes; n++) {
        snprintf(sec, sizeof(sec), "node.%d", n);
        if (hp_ini_check_keys(r->ini, sec, node_keys) ||
            hp_ini_get_str(r->ini, sec, "name", 1, NULL, &v))
            return -HP_ECONFIG;
        snprintf(cl->nodes[n].name, sizeof(cl->nodes[n].name), "%s", v);
        const int k = split_list(r, sec, "gpus", MAX_PLAN_GPUS - cl->ngpus);
        if (k == -2)
            return -HP_ECONFIG;
        if (k == -1)
            BAD("%s: [%s]: key 'gpus': the plan has more than %d GPUs", r->path, sec,
                MAX_PLAN_GPUS);
        if (k == 0)
            BAD("%s: [%s]: key 'gpus': expected a comma-separated list of GPU types", r->path, sec);
        cl->nodes[n].first_gpu = cl->ngpus;
        cl->nodes[n].ngpus = k;
        for (int i = 0; i < k; i++) {
            const int t = hp_gpudb_find(r->db, r->items[i]);
            if (t < 0)
                BAD("%s: [%s]: unknown GPU type '%s'", r->path, sec, r->items[i]);
            cl->gpus[cl->ngpus++] = (struct hp_gpu){.node = n, .index = i, .type = t};
        }
        if (read_devices(r, sec, n, k))
            return -HP_ECONFIG;
    }
    if (r->p->nshards > cl->nnodes)
        BAD("%s: [plan]: %d PS shards for %d nodes", r->path, r->p->nshards, cl->nnodes);
    return 0;
}

static int read_unit_shard(struct reader *r)
{
    struct hp_plan *p = r->p;
    const int last = p->nshards ? p->nshards - 1 : 0;
    int k;

    k = split_list(r, "plan", "unit_shard", p->nunits);
    if (k == -2)
        return -HP_ECONFIG;
    if (k == -1)
        BAD("%s: [plan]: key 'unit_shard': more entries than the %d units", r->path, p->nunits);
    if (k != p->nunits)
        BAD("%s: [plan]: key 'unit_shard': %d entries for %d units", r->path, k < 0 ? 0 : k,
            p->nunits);
    for (int u = 0; u < k; u++) {
        long x;
        if (hp_parse_long(r->items[u], 0, last, &x))
            BAD("%s: [plan]: key 'unit_shard': entry %d ('%s') is not a shard 0..%d", r->path, u,
                r->items[u], last);
        p->unit_shard[u] = (int)x;
    }
    return 0;
}

/* [vw.W.stage.S]: its GPU (node, device, type), rank, units from `next`, figures. */
static int read_stage(struct reader *r, int w, int s, int *next)
{
    struct hp_stage_plan *st = &r->p->vws[w].stages[s];
    const struct hp_cluster *cl = r->cl;
    int rank, node, dev, gi = -1;
    const char *v;
    char sec[64];

    snprintf(sec, sizeof(sec), "vw.%d.stage.%d", w, s);
    if (!hp_ini_has_section(r->ini, sec))
        BAD("%s: [vw.%d] has %d stages but there is no [%s]", r->path, w, r->p->vws[w].nstages,
            sec);
    if (hp_ini_check_keys(r->ini, sec, stage_keys) ||
        get_int(r, sec, "rank", 0, r->p->nranks - 1, &rank) ||
        get_int(r, sec, "node", 0, cl->nnodes - 1, &node) ||
        get_int(r, sec, "device", 0, 4095, &dev) ||
        get_int(r, sec, "first_unit", 0, r->p->nunits - 1, &st->u0) ||
        get_int(r, sec, "end_unit", 1, r->p->nunits, &st->u1) ||
        get_int(r, sec, "in_flight", 1, 1 << 20, &st->in_flight) ||
        hp_ini_get_bool(r->ini, sec, "recompute", 0, 0, &st->recompute) ||
        get_dbl(r, sec, "fwd_s", &st->fwd_s) || get_dbl(r, sec, "bwd_s", &st->bwd_s) ||
        get_dbl(r, sec, "send_s", &st->send_s) ||
        get_dbl(r, sec, "send_back_s", &st->send_back_s) ||
        get_dbl(r, sec, "memory", &st->memory) || get_dbl(r, sec, "capacity", &st->capacity) ||
        hp_ini_get_str(r->ini, sec, "type", 1, NULL, &v))
        return -HP_ECONFIG;
    for (int i = 0; i < cl->nodes[node].ngpus; i++)
        if (cl->gpus[cl->nodes[node].first_gpu + i].index == dev)
            gi = cl->nodes[node].first_gpu + i;
    if (gi < 0)
        BAD("%s: [%s]: device %d, but node '%s' has no such GPU (it has %d)", r->path, sec, dev,
            cl->nodes[node].name, cl->nodes[node].ngpus);
    if (strcmp(r->db->types[cl->gpus[gi].type].name, v) != 0)
        BAD("%s: [%s]: type '%s', but GPU %d of node '%s' is a %s", r->path, sec, v, dev,
            cl->nodes[node].name, r->db->types[cl->gpus[gi].type].name);
    if (r->gpu_used[gi]++)
        BAD("%s: [%s]: GPU %d of node '%s' is used twice", r->path, sec, dev, cl->nodes[node].name);
    if (r->rank_used[rank]++)
        BAD("%s: [%s]: rank %d is used twice", r->path, sec, rank);
    if (st->u0 != *next || st->u1 <= st->u0)
        BAD("%s: [%s]: units %d..%d, but the stage must start at unit %d and hold at least one",
            r->path, sec, st->u0, st->u1 - 1, *next);
    *next = st->u1;
    st->gpu = gi;
    st->compute_s = st->fwd_s + st->bwd_s;
    st->transfer_s = st->send_s + st->send_back_s;
    return 0;
}

static int read_vw(struct reader *r, int w)
{
    struct hp_plan *p = r->p;
    struct hp_vw_plan *vw = &p->vws[w];
    int next = 0;
    char sec[64];

    snprintf(sec, sizeof(sec), "vw.%d", w);
    if (!hp_ini_has_section(r->ini, sec))
        BAD("%s: [plan] says %d virtual workers but there is no [%s]", r->path, p->nvws, sec);
    if (hp_ini_check_keys(r->ini, sec, vw_keys) || get_int(r, sec, "nm", 1, 1 << 20, &vw->nm) ||
        get_int(r, sec, "stages", 1, HP_MAX_VW_GPUS, &vw->nstages) ||
        get_dbl(r, sec, "rate", &vw->rate) || get_dbl(r, sec, "bottleneck_s", &vw->bottleneck_s) ||
        get_dbl(r, sec, "round_s", &vw->round_s))
        return -HP_ECONFIG;
    for (int s = 0; s < vw->nstages; s++)
        if (read_stage(r, w, s, &next))
            return -HP_ECONFIG;
    if (next != p->nunits)
        BAD("%s: [vw.%d]: units %d..%d are in no stage", r->path, w, next, p->nunits - 1);
    for (int s = 0; s < vw->nstages; s++)
        if (vw->stages[s].in_flight > vw->nm)
            BAD("%s: [vw.%d.stage.%d]: in_flight %d, more than the VW's Nm %d", r->path, w, s,
                vw->stages[s].in_flight, vw->nm);
    /* WSP's clocks count waves: one wave size for the job (planner.c, eval_grouping) */
    if (p->nshards && vw->nm != p->vws[0].nm)
        BAD("%s: [vw.%d]: nm = %d, but [vw.0] has %d: with parameter servers every VW has the "
            "same Nm",
            r->path, w, vw->nm, p->vws[0].nm);
    return 0;
}

static int read_shards(struct reader *r)
{
    char sec[64];

    for (int s = 0; s < r->p->nshards; s++) {
        int rank, node;
        snprintf(sec, sizeof(sec), "ps.%d", s);
        if (!hp_ini_has_section(r->ini, sec))
            BAD("%s: [plan] says %d PS shards but there is no [%s]", r->path, r->p->nshards, sec);
        if (hp_ini_check_keys(r->ini, sec, ps_keys) ||
            get_int(r, sec, "rank", 0, r->p->nranks - 1, &rank) ||
            get_int(r, sec, "node", 0, r->cl->nnodes - 1, &node))
            return -HP_ECONFIG;
        if (r->rank_used[rank]++)
            BAD("%s: [%s]: rank %d is used twice", r->path, sec, rank);
    }
    for (int k = 0; k < r->p->nranks; k++)
        if (!r->rank_used[k])
            BAD("%s: rank %d of %d has no role", r->path, k, r->p->nranks);
    return 0;
}

/* At *s: "PREFIX" then an index below `limit`, in decimal without sign or leading zero (so
 * every section has one spelling); advances *s past it. */
static int take_index(const char **s, const char *prefix, int limit, int *out)
{
    const size_t n = strlen(prefix);
    const char *t = *s + n;
    long v = 0;

    if (strncmp(*s, prefix, n) != 0 || !isdigit((unsigned char)*t) ||
        (t[0] == '0' && isdigit((unsigned char)t[1])))
        return 0;
    for (; isdigit((unsigned char)*t); t++) {
        v = 10 * v + (*t - '0');
        if (v >= limit)
            return 0;
    }
    *out = (int)v;
    *s = t;
    return 1;
}

/* No section the format does not know. */
static int check_sections(const struct reader *r)
{
    const struct hp_plan *p = r->p;

    for (int i = 0; i < hp_ini_nsections(r->ini); i++) {
        const char *s = hp_ini_section(r->ini, i), *t = s;
        int a, b;
        if (strcmp(s, "plan") == 0 || (take_index(&t, "node.", r->cl->nnodes, &a) && !*t))
            continue;
        t = s;
        if (take_index(&t, "vw.", p->nvws, &a) &&
            (!*t || (take_index(&t, ".stage.", p->vws[a].nstages, &b) && !*t)))
            continue;
        t = s;
        if (take_index(&t, "ps.", p->nshards, &a) && !*t)
            continue;
        BAD("%s: unknown or surplus section [%s] (a plan has [plan], [node.N], [vw.N], "
            "[vw.N.stage.M] and [ps.N], N and M numbered from 0 without leading zeros)",
            r->path, s);
    }
    return 0;
}

static int read_plan(struct reader *r, char *token)
{
    struct hp_plan *p = r->p;
    int rc;

    if ((rc = read_header(r, token)) || (rc = read_nodes(r)))
        return rc;
    p->unit_shard = calloc((size_t)p->nunits, sizeof(int));
    p->vws = calloc((size_t)p->nvws, sizeof(*p->vws));
    r->rank_used = calloc((size_t)p->nranks, sizeof(int));
    r->gpu_used = calloc((size_t)r->cl->ngpus, sizeof(int));
    if (!p->unit_shard || !p->vws || !r->rank_used || !r->gpu_used)
        return -HP_ENOMEM;
    if ((rc = read_unit_shard(r)))
        return rc;
    for (int w = 0; w < p->nvws; w++)
        if ((rc = read_vw(r, w)))
            return rc;
    if ((rc = read_shards(r)) || (rc = check_sections(r)))
        return rc;
    r->cl->intra_node_gbs = r->db->intra_node_gbs;
    r->cl->inter_node_gbs = r->db->inter_node_gbs;
    r->cl->intra_latency_us = r->db->intra_latency_us;
    r->cl->inter_latency_us = r->db->inter_latency_us;
    return 0;
}

int hp_planfile_load(const char *path, const struct hp_gpudb *db, struct hp_plan *p,
                     struct hp_cluster *cl, char *token)
{
    struct reader r = {.path = path, .db = db, .p = p, .cl = cl};
    int rc;

    memset(p, 0, sizeof(*p));
    memset(cl, 0, sizeof(*cl));
    rc = hp_ini_load(path, &r.ini);
    if (rc)
        return rc;
    rc = read_plan(&r, token);
    if (rc == -HP_ENOMEM)
        hp_error("%s: out of memory reading the plan", path);
    free(r.buf);
    free(r.items);
    free(r.rank_used);
    free(r.gpu_used);
    hp_ini_destroy(r.ini);
    if (rc) {
        hp_plan_release(p);
        hp_cluster_release(cl);
    }
    return rc ? -HP_ECONFIG : 0;
}
