/* outcome.c - how a launched job's ranks ended (outcome.h). */
#include "outcome.h"

#include "ckptfile.h"
#include "error.h"
#include "process.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct rec {
    struct hp_rank_exit e;
    int has;    /* a record was read */
    int failed; /* no record, or a status other than 0 and HP_CKPT_EXIT */
};

/* The rank the failed ranks' blames lead to (each chain followed to a rank that blames no
 * failed peer), the most blamed; -1 when no failed rank blames one. *why: a blamer's words. */
static int blamed(const struct rec *R, int n, const char **why)
{
    int *votes = calloc((size_t)n, sizeof(int)), best = -1;

    if (!votes)
        return -1;
    for (int r = 0; r < n; r++) {
        if (!R[r].failed || !R[r].has || R[r].e.blame < 0 || R[r].e.blame >= n)
            continue;
        int t = R[r].e.blame, hops = 0;
        while (R[t].has && R[t].failed && R[t].e.blame >= 0 && R[t].e.blame < n && hops++ < n)
            t = R[t].e.blame;
        votes[t]++;
    }
    for (int r = 0; r < n; r++)
        if (votes[r] && (best < 0 || votes[r] > votes[best]))
            best = r;
    for (int r = 0; best >= 0 && r < n; r++) /* a blamer of the root itself, for its words */
        if (R[r].failed && R[r].has && R[r].e.blame == best) {
            *why = R[r].e.why;
            break;
        }
    free(votes);
    return best;
}

/* Without blames: a rank that left no record, else one that failed on its own (an exit
 * status), else by a signal other than SIGTERM (which srun sends the others), else any. */
static int unblamed(const struct rec *R, int n)
{
    for (int pass = 0; pass < 4; pass++)
        for (int r = 0; r < n; r++) {
            if (!R[r].failed)
                continue;
            const int sig = R[r].e.signal;
            if ((pass == 0 && !R[r].has) || (pass == 1 && R[r].has && !sig) ||
                (pass == 2 && R[r].has && sig && sig != SIGTERM) || pass == 3)
                return r;
        }
    return -1;
}

static void describe(const struct rec *x, const char *why, struct hp_outcome *o)
{
    char name[32];

    if (why && strncmp(why, "stopped", 7) == 0) {
        o->status = 128 + SIGSTOP;
        snprintf(o->cause, sizeof(o->cause), "was %s: its peers gave up on it", why);
    } else if (x->has && x->e.signal && x->e.signal != SIGTERM) {
        o->status = 128 + x->e.signal;
        snprintf(o->cause, sizeof(o->cause), "was killed by %s (signal %d)",
                 hp_signal_name(x->e.signal, name, sizeof(name)), x->e.signal);
    } else if (x->has && !x->e.signal) {
        o->status = x->e.status;
        snprintf(o->cause, sizeof(o->cause), "failed with exit status %d", x->e.status);
    } else if (!x->has) {
        o->status = 128 + SIGKILL;
        snprintf(o->cause, sizeof(o->cause),
                 "was killed by SIGKILL (signal 9; it left no exit record: only SIGKILL, the OOM "
                 "killer's too, or a lost node ends a rank so)%s%s",
                 why ? "; its peers saw it " : "", why ? why : "");
    } else if (why && strncmp(why, "silent", 6) == 0) {
        o->status = HP_EXIT_SILENT;
        snprintf(o->cause, sizeof(o->cause), "was %s of its peers", why);
    } else {
        o->status = 128 + SIGTERM;
        snprintf(o->cause, sizeof(o->cause), "was killed by SIGTERM (signal %d)", SIGTERM);
    }
}

int hp_outcome_read(const char *dir, int nranks, struct hp_outcome *out)
{
    struct rec *R = calloc(nranks > 0 ? (size_t)nranks : 1, sizeof(*R));
    const char *why = NULL;
    int stopped = 0;

    *out = (struct hp_outcome){.kind = HP_OUTCOME_NONE, .rank = -1};
    if (!R)
        return -HP_ENOMEM;
    for (int r = 0; r < nranks; r++) {
        R[r].has = hp_rank_exit_load(dir, r, &R[r].e) == 0;
        R[r].failed = !R[r].has || (R[r].e.status != 0 && R[r].e.status != HP_CKPT_EXIT);
        out->ended += R[r].has;
        out->failed += R[r].failed;
        stopped += R[r].has && R[r].e.status == HP_CKPT_EXIT;
    }
    if (out->ended == 0) {
        free(R);
        return 0;
    }
    if (out->failed == 0) {
        out->kind = stopped ? HP_OUTCOME_STOPPED : HP_OUTCOME_DONE;
        out->status = stopped ? HP_CKPT_EXIT : 0;
        free(R);
        return 0;
    }
    out->kind = HP_OUTCOME_FAILED;
    out->rank = blamed(R, nranks, &why);
    if (out->rank < 0)
        out->rank = unblamed(R, nranks);
    describe(&R[out->rank], why, out);
    free(R);
    return 0;
}

/* Wall-clock seconds now. */
static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether rank r's heartbeat in dir was written since `since` (wall clock, a second's slack for
 * file systems' time stamps): a file of this launch, not one an earlier run left. */
static int beat_is_new(const char *dir, int r, double since)
{
    char path[4200];
    struct stat st;

    if (snprintf(path, sizeof(path), "%s/rank-%d.alive", dir, r) >= (int)sizeof(path) ||
        lstat(path, &st) != 0)
        return 0;
    return (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 >= since - 1.0;
}

int hp_watch_init(struct hp_watch *w, int nranks)
{
    *w = (struct hp_watch){.nranks = nranks, .since = wall_now()};
    w->count = calloc(nranks > 0 ? (size_t)nranks : 1, sizeof(*w->count));
    w->moved = calloc(nranks > 0 ? (size_t)nranks : 1, sizeof(*w->moved));
    return w->count && w->moved ? 0 : -HP_ENOMEM;
}

int hp_watch_silent(struct hp_watch *w, const char *dir, double now, double *quiet)
{
    const int fresh = now - w->checked > 3.0 * HP_BEAT_S;
    unsigned long c;
    int st;

    if (now - w->checked < HP_BEAT_S)
        return -1;
    w->checked = now;
    for (int r = 0; r < w->nranks; r++) {
        if (hp_rank_beat_read(dir, r, &c))
            continue;
        if (w->moved[r] == 0.0 || c != w->count[r]) {
            /* moved, or first seen: a file written in this launch is timed from now (its rank
             * may be stopped before it is ever seen to move); one an earlier run left, not
             * until it moves (-1) */
            w->moved[r] = w->moved[r] != 0.0 || beat_is_new(dir, r, w->since) ? now : -1.0;
            w->count[r] = c;
            continue;
        }
        if (w->moved[r] > 0.0 && fresh)
            w->moved[r] = now;
        if (w->moved[r] > 0.0 && now - w->moved[r] >= HP_SILENT_S &&
            hp_rank_exit_read(dir, r, &st) != 0) {
            *quiet = now - w->moved[r];
            return r;
        }
    }
    return -1;
}

void hp_watch_release(struct hp_watch *w)
{
    free(w->count);
    free(w->moved);
    *w = (struct hp_watch){0};
}
