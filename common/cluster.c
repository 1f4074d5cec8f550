/* cluster.c - cluster descriptions: nodes and their typed GPUs. */
#include "cluster.h"

#include "error.h"
#include "ini.h"
#include "log.h"
#include "paths.h"
#include "parse.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PER_ITEM 4096 /* GPUs in one TYPE:COUNT item */
#define MAX_GPUS 65536    /* GPUs in a cluster */
#define MAX_NODES 65536

static const char *const keys_cluster[] = {"name", "intra_node_gbs", "inter_node_gbs", NULL};
static const char *const keys_node[] = {"name", "gpus+", "devices+", NULL};

void hp_cluster_release(struct hp_cluster *c)
{
    if (!c)
        return;
    free(c->nodes);
    free(c->gpus);
    memset(c, 0, sizeof(*c));
}

/* Trim spaces at both ends of s, in place; returns the first non-space. */
static char *trim(char *s)
{
    char *end;

    while (isspace((unsigned char)*s))
        s++;
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

/* origin: "FILE: [node]: key 'gpus'" or "Slurm job 42: node node1" */
static void unknown_type(const char *origin, const char *type, const struct hp_gpudb *db)
{
    char list[1024] = "";

    for (int i = 0; i < db->ntypes; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", db->types[i].name);
    }
    hp_error("%s: unknown GPU type '%s' (known: %s); add a [gpu.%s] section to the site config "
             "(etc/hetpipe.conf)",
             origin, type, list, type);
}

/* Parse node `sec`'s "TYPE:COUNT[, TYPE:COUNT ...]". Counts its GPUs into *ngpus; when `out`
 * is not NULL also writes them there (node `node`, device indices from 0). */
static int parse_gpus(const struct hp_ini *ini, const char *sec, const struct hp_gpudb *db,
                      int node, struct hp_gpu *out, int *ngpus)
{
    const char *path = hp_ini_path(ini);
    char *v, *buf, *item, *save = NULL;
    int rc, n = 0;

    if ((rc = hp_ini_get_list(ini, sec, "gpus", 1, &v)))
        return rc;
    rc = -HP_ECONFIG;
    buf = strdup(v);
    if (!buf) {
        free(v);
        return -HP_ENOMEM;
    }
    /* strtok_r would skip empty items; "a:1,,b:1" and a trailing comma are errors here. */
    for (item = buf; item; item = save) {
        char *colon, *type, *count;
        long k;
        int t;

        save = strchr(item, ',');
        if (save)
            *save++ = '\0';
        colon = strchr(item, ':');
        if (!colon)
            goto bad;
        *colon = '\0';
        type = trim(item);
        count = trim(colon + 1);
        if (!*type)
            goto bad;
        if (hp_parse_long(count, 1, MAX_PER_ITEM, &k)) {
            hp_error("%s: [%s]: key 'gpus': count '%s' for type '%s' is not an integer in 1..%d",
                     path, sec, count, type, MAX_PER_ITEM);
            goto out;
        }
        t = hp_gpudb_find(db, type);
        if (t < 0) {
            char origin[4200];
            snprintf(origin, sizeof(origin), "%s: [%s]: key 'gpus'", path, sec);
            unknown_type(origin, type, db);
            goto out;
        }
        if (*ngpus + n + k > MAX_GPUS) {
            hp_error("%s: [%s]: key 'gpus': the cluster has more than %d GPUs", path, sec,
                     MAX_GPUS);
            goto out;
        }
        for (long j = 0; out && j < k; j++)
            out[n + j] = (struct hp_gpu){.node = node, .index = n + (int)j, .type = t};
        n += (int)k;
    }
    *ngpus += n;
    rc = 0;
    goto out;
bad:
    hp_error("%s: [%s]: key 'gpus': '%s' is not TYPE:COUNT[, TYPE:COUNT ...] (e.g. titanv:4, "
             "p4000:2)",
             path, sec, v);
out:
    free(buf);
    free(v);
    return rc;
}

/* Node `sec`'s optional "devices = I, J, ...": the device indices of its GPUs (in the order
 * of "gpus"), as Slurm numbers them (gres.conf order, CUDA_VISIBLE_DEVICES without device
 * cgroups); without it the GPUs are 0, 1, ... Distinct integers, one per GPU. */
static int parse_devices(const struct hp_ini *ini, const char *sec, struct hp_gpu *g, int n)
{
    const char *path = hp_ini_path(ini);
    char *v, *buf, *item, *save = NULL;
    int k = 0, rc;

    if ((rc = hp_ini_get_list(ini, sec, "devices", 0, &v)) || !v)
        return rc;
    buf = strdup(v);
    if (!buf) {
        free(v);
        return -HP_ENOMEM;
    }
    for (item = buf; item; item = save, k++) {
        long d;
        save = strchr(item, ',');
        if (save)
            *save++ = '\0';
        if (k >= n || hp_parse_long(trim(item), 0, 4095, &d))
            goto bad;
        for (int j = 0; j < k; j++)
            if (g[j].index == (int)d)
                goto bad;
        g[k].index = (int)d;
    }
    if (k != n)
        goto bad;
    free(buf);
    free(v);
    return 0;
bad:
    hp_error("%s: [%s]: key 'devices': '%s' is not %d distinct device indices 0..4095, one per "
             "GPU of 'gpus'",
             path, sec, v, n);
    free(buf);
    free(v);
    return -HP_ECONFIG;
}

static int get_link(const struct hp_ini *ini, const char *key, double def, double *out)
{
    double v;

    if (hp_ini_get_double(ini, "cluster", key, 0, def, 0.0, 1e6, &v))
        return -HP_ECONFIG;
    if (v <= 0.0) {
        hp_error("%s: [cluster]: key '%s': must be greater than 0 (GB/s)", hp_ini_path(ini), key);
        return -HP_ECONFIG;
    }
    *out = v;
    return 0;
}

/* Node section `sec`'s name: its key 'name' (a node name that a section cannot hold: upper
 * case, spaces, ';', ...) or else the section's own name. */
static int node_name(const struct hp_ini *ini, const char *sec, const char **out)
{
    if (hp_ini_get_str(ini, sec, "name", 0, sec, out))
        return -HP_ECONFIG;
    if (!**out || strlen(*out) >= HP_NODE_NAME_MAX) {
        hp_error("%s: [%s]: node names have 1 to %d characters", hp_ini_path(ini), sec,
                 HP_NODE_NAME_MAX - 1);
        return -HP_ECONFIG;
    }
    return 0;
}

int hp_cluster_load(const char *path, const struct hp_gpudb *db, struct hp_cluster *c)
{
    struct hp_ini *ini = NULL;
    const char *name;
    int nsec, rc;

    memset(c, 0, sizeof(*c));
    rc = hp_ini_load(path, &ini);
    if (rc)
        return rc;
    rc = -HP_ECONFIG;
    if (!hp_ini_has_section(ini, "cluster")) {
        hp_error("%s: missing section [cluster] (name, intra_node_gbs, inter_node_gbs)", path);
        goto out;
    }
    if (hp_ini_check_keys(ini, "cluster", keys_cluster) ||
        hp_ini_get_str(ini, "cluster", "name", 0, NULL, &name) ||
        get_link(ini, "intra_node_gbs", db->intra_node_gbs, &c->intra_node_gbs) ||
        get_link(ini, "inter_node_gbs", db->inter_node_gbs, &c->inter_node_gbs))
        goto out;
    if (!name) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        snprintf(c->name, sizeof(c->name), "%.*s", (int)strcspn(base, "."), base);
    } else if (!*name || strlen(name) >= sizeof(c->name)) {
        hp_error("%s: [cluster]: key 'name': must have 1 to %d characters", path,
                 (int)sizeof(c->name) - 1);
        goto out;
    } else {
        snprintf(c->name, sizeof(c->name), "%s", name);
    }
    c->intra_latency_us = db->intra_latency_us;
    c->inter_latency_us = db->inter_latency_us;

    /* Pass 1: check every node and count; pass 2 (cannot fail) fills the arrays. */
    nsec = hp_ini_nsections(ini);
    for (int s = 0; s < nsec; s++) {
        const char *sec = hp_ini_section(ini, s);

        if (strcmp(sec, "cluster") == 0)
            continue;
        if (c->nnodes == MAX_NODES) {
            hp_error("%s: more than %d nodes", path, MAX_NODES);
            goto out;
        }
        if (hp_ini_check_keys(ini, sec, keys_node) || node_name(ini, sec, &name))
            goto out;
        rc = parse_gpus(ini, sec, db, c->nnodes, NULL, &c->ngpus);
        if (rc)
            goto out;
        rc = -HP_ECONFIG;
        c->nnodes++;
    }
    if (c->nnodes == 0) {
        hp_error("%s: no nodes (add a section per node, e.g. [node1] with gpus = titanv:4)", path);
        goto out;
    }
    c->nodes = calloc((size_t)c->nnodes, sizeof(*c->nodes));
    c->gpus = calloc((size_t)c->ngpus, sizeof(*c->gpus));
    if (!c->nodes || !c->gpus) {
        rc = -HP_ENOMEM;
        goto out;
    }
    for (int s = 0, node = 0, first = 0; s < nsec; s++) {
        const char *sec = hp_ini_section(ini, s);
        int n = 0;

        if (strcmp(sec, "cluster") == 0)
            continue;
        rc = parse_gpus(ini, sec, db, node, c->gpus + first, &n);
        if (!rc)
            rc = parse_devices(ini, sec, c->gpus + first, n);
        if (!rc)
            rc = node_name(ini, sec, &name);
        if (rc)
            goto out;
        for (int j = 0; j < node; j++)
            if (strcmp(c->nodes[j].name, name) == 0) {
                hp_error("%s: [%s]: node '%s' is given twice (node names are unique)", path, sec,
                         name);
                rc = -HP_ECONFIG;
                goto out;
            }
        snprintf(c->nodes[node].name, sizeof(c->nodes[node].name), "%s", name);
        c->nodes[node].first_gpu = first;
        c->nodes[node].ngpus = n;
        first += n;
        node++;
    }
    rc = 0;
out:
    hp_ini_destroy(ini);
    if (rc)
        hp_cluster_release(c);
    return rc;
}

/* The arrays of a cluster built in memory, its name, the database's link speeds. */
static int cluster_alloc(struct hp_cluster *c, const struct hp_gpudb *db, const char *name,
                         int nnodes, int ngpus)
{
    c->nodes = calloc((size_t)nnodes, sizeof(*c->nodes));
    c->gpus = calloc((size_t)(ngpus ? ngpus : 1), sizeof(*c->gpus));
    if (!c->nodes || !c->gpus) {
        hp_cluster_release(c);
        return -HP_ENOMEM;
    }
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->nnodes = nnodes;
    c->ngpus = ngpus;
    c->intra_node_gbs = db->intra_node_gbs;
    c->inter_node_gbs = db->inter_node_gbs;
    c->intra_latency_us = db->intra_latency_us;
    c->inter_latency_us = db->inter_latency_us;
    return 0;
}

int hp_cluster_make(const struct hp_gpudb *db, int nnodes, const int *counts, const int *types,
                    struct hp_cluster *c)
{
    int ngpus = 0;

    memset(c, 0, sizeof(*c));
    if (nnodes < 1 || nnodes > MAX_NODES) {
        hp_error("cannot make a cluster of %d nodes (allowed: 1 to %d)", nnodes, MAX_NODES);
        return -HP_EINVAL;
    }
    for (int i = 0; i < nnodes; i++) {
        if (counts[i] < 1 || counts[i] > MAX_PER_ITEM || ngpus + counts[i] > MAX_GPUS) {
            hp_error("cannot make a cluster: node %d has %d GPUs (allowed: 1 to %d, at most %d "
                     "in all)",
                     i + 1, counts[i], MAX_PER_ITEM, MAX_GPUS);
            return -HP_EINVAL;
        }
        if (types[i] < 0 || types[i] >= db->ntypes) {
            hp_error("cannot make a cluster: node %d has GPU type %d (the database has %d)", i + 1,
                     types[i], db->ntypes);
            return -HP_EINVAL;
        }
        ngpus += counts[i];
    }
    if (cluster_alloc(c, db, "synthetic", nnodes, ngpus))
        return -HP_ENOMEM;
    for (int i = 0, g = 0; i < nnodes; i++) {
        snprintf(c->nodes[i].name, sizeof(c->nodes[i].name), "node%d", i + 1);
        c->nodes[i].first_gpu = g;
        c->nodes[i].ngpus = counts[i];
        for (int j = 0; j < counts[i]; j++, g++)
            c->gpus[g] = (struct hp_gpu){.node = i, .index = j, .type = types[i]};
    }
    return 0;
}

int hp_cluster_build(const struct hp_gpudb *db, const char *name, const char *origin,
                     const struct hp_cluster_node *nodes, int nnodes, struct hp_cluster *c)
{
    int ngpus = 0;

    memset(c, 0, sizeof(*c));
    if (nnodes < 1 || nnodes > MAX_NODES) {
        hp_error("%s: %d nodes (allowed: 1 to %d)", origin, nnodes, MAX_NODES);
        return -HP_ECONFIG;
    }
    for (int i = 0; i < nnodes; i++) {
        if (nodes[i].ngpus < 0 || ngpus + nodes[i].ngpus > MAX_GPUS ||
            strlen(nodes[i].name) >= HP_NODE_NAME_MAX) {
            hp_error("%s: node '%.64s': %d GPUs or a name longer than %d characters", origin,
                     nodes[i].name, nodes[i].ngpus, HP_NODE_NAME_MAX - 1);
            return -HP_ECONFIG;
        }
        for (int j = 0; j < nodes[i].ngpus; j++)
            if (hp_gpudb_find(db, nodes[i].types[j]) < 0) {
                char where[256];
                snprintf(where, sizeof(where), "%.120s: node %s", origin, nodes[i].name);
                unknown_type(where, nodes[i].types[j], db);
                return -HP_ECONFIG;
            }
        ngpus += nodes[i].ngpus;
    }
    if (cluster_alloc(c, db, name, nnodes, ngpus))
        return -HP_ENOMEM;
    for (int i = 0, g = 0; i < nnodes; i++) {
        snprintf(c->nodes[i].name, sizeof(c->nodes[i].name), "%s", nodes[i].name);
        c->nodes[i].first_gpu = g;
        c->nodes[i].ngpus = nodes[i].ngpus;
        for (int j = 0; j < nodes[i].ngpus; j++, g++)
            c->gpus[g] = (struct hp_gpu){.node = i,
                                         .index = nodes[i].devices[j],
                                         .type = hp_gpudb_find(db, nodes[i].types[j])};
    }
    return 0;
}

int hp_cluster_resolve(const char *name, char *buf, size_t n)
{
    if (hp_path_find("clusters", HP_OPT_CLUSTERS, name, buf, n) == 0)
        return 0;
    hp_error("unknown cluster '%s': no %s.ini in $HETPIPE_CLUSTERS, ./etc/clusters, %s/clusters "
             "or next to the executable (give a path to an .ini file, or see etc/clusters)",
             name, name, HP_DATADIR);
    return -HP_ENOTFOUND;
}
