/* cmd_data.c - `hetpipe data`: check a data set (its format, classes, samples per split, every
 * image's header, the image sizes; against a model's classes), and pack an image folder into
 * WebDataset tar shards. */
#include "commands.h"
#include "feed.h"
#include "data.h"
#include "error.h"
#include "image.h"
#include "log.h"
#include "model.h"
#include "source.h"
#include "text.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHOW_CLASSES 5
#define SHOW_BAD 20
/* pack writes each split's samples in this seeded order (WebDataset shards are written
 * shuffled, so that shuffling the shards and within each is enough when reading) */
#define PACK_SEED 0x7061636bULL

static const char synopsis[] =
    "usage: hetpipe data check DIR [--model NAME|PATH]\n"
    "       hetpipe data pack DIR OUT [--shard-size BYTES] [--split train|val|both]\n"
    "       hetpipe data bench DIR --model NAME|PATH [--data-threads N] [--samples N]\n"
    "             [--batch N] [--data-augment standard|none] [--seed N]\n"
    "check: a data set's format (IDX files, an image folder DIR/train/CLASS/*.jpg, tar shards\n"
    "DIR/train-000000.tar), its classes, samples per split, every image's header (undecodable\n"
    "ones by name) and the image sizes; with --model, that the model's classes match. Exit 1 on\n"
    "a problem.\n"
    "pack: an image folder into WebDataset shards OUT/train-000000.tar ... (members KEY.jpg or\n"
    "KEY.png and KEY.cls, KEY the sample's id in the folder, in a fixed shuffled order) and\n"
    "OUT/classes.txt; OUT must not exist or be empty. The shards are read back and compared.\n"
    "bench: decode and augment --samples training samples for the model's input as a job's\n"
    "input rank does (its threads and queue), none trained on: images/s, and per core of CPU\n"
    "time.\n";

static const char *const split_names[2] = {"train", "val"};

static int cmp_int(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Every image's header: bad ones listed (the first SHOW_BAD), sizes summed up. Returns the
 * number of problems. */
static long probe_all(struct hp_source *s)
{
    const long total = s->n[0] + s->n[1];
    int *w = malloc((size_t)(total ? total : 1) * sizeof(int));
    int *h = malloc((size_t)(total ? total : 1) * sizeof(int));
    long good = 0, bad = 0, njpeg = 0, npng = 0;
    char err[512], why[256];

    if (!w || !h) {
        free(w);
        free(h);
        hp_error("data check: out of memory for %ld image sizes", total);
        return 1;
    }
    for (int sp = 0; sp < 2; sp++) {
        s->ops->begin(s, sp, NULL, 0); /* in id order: each shard is read once */
        for (long id = 0; id < s->n[sp]; id++) {
            struct hp_sample smp;
            struct hp_image_info info;
            int rc = s->ops->read(s, sp, id, &smp, err, sizeof(err));
            const char *what = rc ? "unreadable" : "undecodable";
            if (rc == 0) {
                rc = hp_image_probe(smp.data, smp.size, &info, why, sizeof(why));
                if (rc)
                    snprintf(err, sizeof(err), "%.250s: %s", smp.name, why);
                s->ops->release(s, &smp);
            }
            if (rc) {
                if (bad++ < SHOW_BAD)
                    printf("  %s: %s\n", what, err);
                continue;
            }
            njpeg += strcmp(info.format, "JPEG") == 0;
            npng += strcmp(info.format, "PNG") == 0;
            w[good] = info.width;
            h[good++] = info.height;
        }
    }
    if (bad > SHOW_BAD)
        printf("  ... and %ld more\n", bad - SHOW_BAD);
    printf("images: %ld readable (%ld JPEG, %ld PNG), %ld unreadable or undecodable\n", good, njpeg,
           npng, bad);
    if (good > 0) {
        qsort(w, (size_t)good, sizeof(int), cmp_int);
        qsort(h, (size_t)good, sizeof(int), cmp_int);
        printf("image width: min %d, median %d, max %d; height: min %d, median %d, max %d\n", w[0],
               w[good / 2], w[good - 1], h[0], h[good / 2], h[good - 1]);
    }
    free(w);
    free(h);
    return bad;
}

/* A text model's corpus (text.h): its format, files, entries, tokens and sequences per split;
 * a token file's tokens are checked against the vocabulary, all of them. */
static int text_check(const char *dir, struct hp_model *m)
{
    struct hp_text *t;
    char q[600];
    int rc = hp_text_open(dir, hp_model_positions(m), m->classes, 1, &t);

    if (rc)
        return 1;
    const struct hp_text_counts *n = hp_text_n(t);
    printf("data set: %s\nformat: %s\nmodel: %s (context %d, vocabulary %d)\n",
           hp_str_escape(dir, q, sizeof(q)), hp_text_describe(t), m->name, n->T, n->vocab);
    for (int sp = 0; sp < 2; sp++) {
        printf("%s: %" PRId64 " tokens, %ld %s", split_names[sp], n->ntokens[sp], n->nseq[sp],
               sp == HP_TEXT_TRAIN ? "sequences an epoch" : "windows");
        if (n->entries[sp])
            printf(", %ld entries", n->entries[sp]);
        printf(" (%d file%s)\n", n->files[sp], n->files[sp] == 1 ? "" : "s");
    }
    int32_t *tok = malloc(65536 * sizeof(int32_t));
    for (int sp = 0; sp < 2 && tok && !rc && hp_text_kind(t) == HP_TEXT_LLMC; sp++)
        for (int64_t off = 0; off < n->ntokens[sp] && !rc; off += 65536) /* every token < V */
            rc = hp_text_read(t, sp, off,
                              (long)(n->ntokens[sp] - off < 65536 ? n->ntokens[sp] - off : 65536),
                              tok);
    if (!tok)
        rc = -HP_ENOMEM;
    free(tok);
    hp_text_close(t);
    if (rc)
        hp_error("data check: problems in %s", q);
    else
        printf("check: OK\n");
    return rc ? 1 : 0;
}

static int data_check(const char *dir, const char *model)
{
    struct hp_model *m = NULL;
    struct hp_source *s;
    long problems = 0;
    char q[600], c[300];

    if (model && hp_model_load(model, &m))
        return 1;
    if (m && m->positions > 0) {
        const int rc = text_check(dir, m);
        hp_model_destroy(m);
        return rc;
    }
    if (hp_source_open(dir, m ? m->dataset : NULL, 0, &s)) {
        hp_model_destroy(m);
        return 1;
    }
    printf("data set: %s\nformat: %s\nclasses: %d (", hp_str_escape(s->root, q, sizeof(q)),
           hp_source_kind_name(s), s->nclasses);
    for (int k = 0; k < s->nclasses && k < SHOW_CLASSES; k++)
        printf("%s%s", k ? ", " : "", hp_str_escape(s->classes[k], c, sizeof(c)));
    printf("%s)\n", s->nclasses > SHOW_CLASSES ? ", ..." : "");
    for (int sp = 0; sp < 2; sp++) {
        printf("%s: %ld samples", split_names[sp], s->n[sp]);
        if (s->kind == HP_SOURCE_SHARDS)
            printf(" in %d shards", s->nshards[sp]);
        if (s->nskipped[sp])
            printf(", %ld other entr%s passed over (not .jpg/.jpeg/.png%s)", s->nskipped[sp],
                   s->nskipped[sp] == 1 ? "y" : "ies",
                   s->kind == HP_SOURCE_SHARDS ? "/.cls members" : " files");
        printf("\n");
    }
    if (s->encoded)
        problems += probe_all(s);
    else
        printf("images: %d x %d x %d floats, not encoded (nothing to decode)\n", s->c, s->h, s->w);
    if (m && m->classes != s->nclasses) {
        hp_error("model '%s' has %d classes, the data set at %s has %d", m->name, m->classes, q,
                 s->nclasses);
        problems++;
    }
    if (problems)
        hp_error("data check: %ld problem%s in %s", problems, problems == 1 ? "" : "s", q);
    else
        printf("check: OK\n");
    hp_source_close(s);
    hp_model_destroy(m);
    return problems ? 1 : 0;
}

/* What pack made in OUT, to take back on failure (never a file it did not create). */
struct pack {
    const char *out;
    char q[600];
    int outfd, made_dir;
    char **created;
    int ncreated;
    size_t cap;
    long shard_size;
};

static int create_file(struct pack *p, const char *name)
{
    const int fd =
        openat(p->outfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    int rc;

    if (fd < 0) {
        rc = -errno;
        hp_error("data pack: cannot create '%s/%s': %s", p->q, name, hp_strerror(rc));
        return rc;
    }
    if ((size_t)p->ncreated == p->cap) {
        const size_t cap = p->cap ? 2 * p->cap : 16;
        char **c = realloc(p->created, cap * sizeof(char *));
        if (!c) {
            close(fd);
            unlinkat(p->outfd, name, 0);
            return -HP_ENOMEM;
        }
        p->created = c;
        p->cap = cap;
    }
    if (!(p->created[p->ncreated] = strdup(name))) {
        close(fd);
        unlinkat(p->outfd, name, 0);
        return -HP_ENOMEM;
    }
    p->ncreated++;
    return fd;
}

/* OUT: made, or an empty directory already there. */
static int prepare_out(struct pack *p)
{
    struct dirent *e;
    DIR *d;
    int rc = 0;

    hp_str_escape(p->out, p->q, sizeof(p->q));
    if (mkdir(p->out, 0777) == 0)
        p->made_dir = 1;
    else if (errno != EEXIST) {
        rc = -errno;
        hp_error("data pack: cannot make the directory '%s': %s", p->q, hp_strerror(rc));
        return rc;
    }
    p->outfd = open(p->out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (p->outfd < 0) {
        rc = -errno;
        hp_error("data pack: '%s' is not a directory pack can write into: %s", p->q,
                 hp_strerror(rc));
        return rc;
    }
    const int fd = dup(p->outfd);
    d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -HP_ENOMEM;
    }
    while (rc == 0 && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            hp_error("data pack: '%s' exists and is not empty: pack writes into a new or empty "
                     "directory (it never replaces a file)",
                     p->q);
            rc = -HP_EINVAL;
        }
    closedir(d);
    return rc;
}

static void undo(struct pack *p)
{
    for (int i = 0; i < p->ncreated; i++)
        unlinkat(p->outfd, p->created[i], 0);
    if (p->made_dir)
        rmdir(p->out);
}

static int write_classes(struct pack *p, const struct hp_source *s)
{
    char c[300];
    int fd, rc = 0;
    FILE *f;

    for (int k = 0; k < s->nclasses; k++)
        if (strpbrk(s->classes[k], "\r\n")) {
            hp_error("data pack: class folder '%s' has a line break in its name: classes.txt "
                     "cannot name it (rename the folder)",
                     hp_str_escape(s->classes[k], c, sizeof(c)));
            return -HP_EDATA;
        }
    if ((fd = create_file(p, "classes.txt")) < 0)
        return fd;
    if (!(f = fdopen(fd, "w"))) {
        close(fd);
        return -HP_ENOMEM;
    }
    for (int k = 0; k < s->nclasses; k++)
        fprintf(f, "%s\n", s->classes[k]);
    if (ferror(f) | fclose(f)) {
        rc = -HP_EIO;
        hp_error("data pack: cannot write '%s/classes.txt'", p->q);
    }
    return rc;
}

static int write_member(struct archive *a, const char *name, const void *data, size_t size)
{
    struct archive_entry *e = archive_entry_new();
    int rc = 0;

    if (!e)
        return -HP_ENOMEM;
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, 0, 0); /* the same folder packs into the same bytes */
    if (archive_write_header(a, e) != ARCHIVE_OK ||
        (size && archive_write_data(a, data, size) != (la_ssize_t)size))
        rc = -HP_EIO;
    archive_entry_free(e);
    return rc;
}

/* A new tar writer on shard file `name` in OUT (created); NULL on failure (logged). */
static struct archive *open_shard(struct pack *p, const char *name, int *fd)
{
    struct archive *a;

    if ((*fd = create_file(p, name)) < 0)
        return NULL;
    a = archive_write_new();
    if (!a || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
        archive_write_open_fd(a, *fd) != ARCHIVE_OK) {
        hp_error("data pack: cannot start '%s/%s': %s", p->q, name,
                 a ? archive_error_string(a) : "out of memory");
        archive_write_free(a);
        close(*fd);
        return NULL;
    }
    return a;
}

static int close_shard(struct pack *p, struct archive *a, int fd, const char *name, int rc)
{
    if (archive_write_close(a) != ARCHIVE_OK && rc == 0) {
        hp_error("data pack: cannot write '%s/%s': %s", p->q, name, archive_error_string(a));
        rc = -HP_EIO;
    }
    archive_write_free(a);
    if (close(fd) != 0 && rc == 0) {
        rc = -errno;
        hp_error("data pack: cannot write '%s/%s': %s", p->q, name, hp_strerror(rc));
    }
    return rc;
}

/* Split sp's samples in PACK_SEED's order into shards SPLIT-NNNNNN.tar; counts in *nshards,
 * *bytes. */
static int pack_split(struct pack *p, struct hp_source *s, int sp, int *nshards, size_t *bytes)
{
    const long n = s->n[sp];
    int *order = malloc((size_t)n * sizeof(int));
    struct archive *a = NULL;
    char name[64], member[64], err[600], ext[8], label[16];
    size_t in_bytes = 0;
    long in_n = 0;
    int fd = -1, rc = 0;

    *nshards = 0;
    *bytes = 0;
    if (!order)
        return -HP_ENOMEM;
    hp_permute(order, (int)n, PACK_SEED + (uint64_t)sp);
    for (long i = 0; rc == 0 && i < n; i++) {
        struct hp_sample smp;
        if ((rc = s->ops->read(s, sp, order[i], &smp, err, sizeof(err))) != 0) {
            hp_error("data pack: %s", err);
            break;
        }
        const char *dot = strrchr(smp.name, '.');
        snprintf(ext, sizeof(ext), "%s", dot ? dot + 1 : "jpg");
        for (char *c = ext; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        /* a member's bytes: its header and data in 512-byte blocks, and the label's */
        const size_t need = 512 + (smp.size + 511) / 512 * 512 + 1024;
        if (a && in_n > 0 && in_bytes + need > (size_t)p->shard_size) {
            rc = close_shard(p, a, fd, name, 0);
            a = NULL;
        }
        if (rc == 0 && !a) {
            snprintf(name, sizeof(name), "%s-%06d.tar", split_names[sp], (*nshards)++);
            if (!(a = open_shard(p, name, &fd)))
                rc = -HP_EIO;
            in_bytes = 1024; /* the end-of-archive blocks */
            in_n = 0;
        }
        snprintf(member, sizeof(member), "%08d.%s", order[i], ext);
        if (rc == 0 && (rc = write_member(a, member, smp.data, smp.size)) == 0) {
            snprintf(member, sizeof(member), "%08d.cls", order[i]);
            snprintf(label, sizeof(label), "%d", smp.label);
            rc = write_member(a, member, label, strlen(label));
        }
        if (rc == -HP_EIO && a)
            hp_error("data pack: cannot write '%s/%s': %s", p->q, name, archive_error_string(a));
        s->ops->release(s, &smp);
        in_bytes += need;
        in_n++;
        *bytes += smp.size;
    }
    if (a)
        rc = close_shard(p, a, fd, name, rc);
    free(order);
    return rc;
}

/* The shards in OUT opened as a source agree with the folder: counts, classes. */
static int read_back(struct pack *p, const struct hp_source *s, const long packed[2])
{
    struct hp_source *t;
    int rc = hp_source_open_shards(p->out, packed[1] > 0, &t);

    if (rc) {
        hp_error("data pack: the shards written to '%s' do not read back (above)", p->q);
        return rc;
    }
    if (t->n[0] != packed[0] || t->n[1] != packed[1] || t->nclasses != s->nclasses) {
        hp_error("data pack: the shards in '%s' read back as %ld + %ld samples of %d classes, "
                 "not %ld + %ld of %d",
                 p->q, t->n[0], t->n[1], t->nclasses, packed[0], packed[1], s->nclasses);
        rc = -HP_EDATA;
    }
    for (int k = 0; rc == 0 && k < s->nclasses; k++)
        if (strcmp(t->classes[k], s->classes[k]) != 0) {
            hp_error("data pack: class %d reads back from '%s/classes.txt' differently", k, p->q);
            rc = -HP_EDATA;
        }
    hp_source_close(t);
    return rc;
}

static int data_pack(const char *dir, const char *out, long shard_size, long which)
{
    struct pack p = {.out = out, .outfd = -1, .shard_size = shard_size};
    struct hp_source *s;
    long packed[2] = {0, 0};
    int rc;

    if ((rc = hp_source_open(dir, "imagenet", which == HP_SPLIT_CHOICE_VAL, &s)) != 0)
        return 1;
    if (s->kind != HP_SOURCE_FOLDER) {
        hp_error("data pack: '%s' holds %s, not an image folder (DIR/train/CLASS/*.jpg)", s->root,
                 hp_source_kind_name(s));
        hp_source_close(s);
        return 1;
    }
    rc = prepare_out(&p);
    if (rc == 0)
        rc = write_classes(&p, s);
    for (int sp = 0; rc == 0 && sp < 2; sp++) {
        int nshards;
        size_t bytes;
        if ((sp == 0 && which == HP_SPLIT_CHOICE_VAL) ||
            (sp == 1 && which == HP_SPLIT_CHOICE_TRAIN) || s->n[sp] == 0)
            continue;
        rc = pack_split(&p, s, sp, &nshards, &bytes);
        if (rc == 0) {
            packed[sp] = s->n[sp];
            printf("%s: %ld samples (%.1f MiB of images) in %d shards %s/%s-000000.tar ...\n",
                   split_names[sp], s->n[sp], (double)bytes / 1048576.0, nshards, p.q,
                   split_names[sp]);
        }
    }
    if (rc == 0)
        rc = read_back(&p, s, packed);
    if (rc == 0)
        printf("classes: %d in %s/classes.txt; read back: the same samples and classes\n",
               s->nclasses, p.q);
    else if (p.outfd >= 0)
        undo(&p);
    if (p.outfd >= 0)
        close(p.outfd);
    for (int i = 0; i < p.ncreated; i++)
        free(p.created[i]);
    free(p.created);
    hp_source_close(s);
    hp_cmd_report("data pack", rc);
    return rc ? 1 : 0;
}

/* hetpipe data bench: the feed's input alone (feed.h: hp_feed_bench). */
static int data_bench(const char *dir, const struct hp_options *o)
{
    struct hp_model *m;
    struct hp_feed_stats st;
    double ips, wall, cpu;
    int rc;

    if (!o->model || !*o->model) {
        hp_error("data bench: give --model (the input size and classes to prepare for)");
        return 2;
    }
    if ((rc = hp_model_load(o->model, &m)))
        return 1;
    const struct hp_feed_config c = {.dir = dir,
                                     .model = m,
                                     .mode = HP_FEED_INPUT,
                                     .batch = (int)o->batch,
                                     .nvws = 1,
                                     .seed = (uint64_t)o->seed,
                                     .threads = (int)o->data_threads,
                                     .queue = (int)o->data_queue,
                                     .augment = o->data_augment};
    rc = hp_feed_bench(&c, o->samples, &ips, &wall, &cpu, &st);
    if (!rc)
        printf("data bench: %ld samples of %dx%dx%d in %.3f s: images_per_s=%.1f threads=%d "
               "cpu_s=%.3f images_per_cpu_s=%.1f decode_per_thread=%.1f\n",
               st.decoded, m->input.c, m->input.h, m->input.w, wall, ips, st.threads, cpu,
               cpu > 0 ? (double)st.decoded / cpu : 0,
               st.decode_s > 0 ? (double)st.decoded / st.decode_s : 0);
    hp_model_destroy(m);
    hp_cmd_report("data bench", rc);
    return rc ? 1 : 0;
}

int hp_cmd_data(int argc, char **argv)
{
    struct hp_options o;
    int rest, rc = hp_cmd_options(HP_CMD_DATA, synopsis, argc, argv, &o, 1, &rest);
    const char *sub;

    if (rc >= 0)
        return rc;
    if (rest >= argc) {
        hp_error("data: give a subcommand: check, pack or bench (see hetpipe data --help)");
        return 2;
    }
    sub = argv[rest++];
    if (strcmp(sub, "check") == 0) {
        const char *dir = rest < argc ? argv[rest++] : o.data;
        if (rest < argc) {
            hp_error("data check: unexpected argument '%s' (see hetpipe data --help)", argv[rest]);
            return 2;
        }
        return data_check(dir, o.model && *o.model ? o.model : NULL);
    }
    if (strcmp(sub, "pack") == 0) {
        if (argc - rest != 2) {
            hp_error("data pack: give DIR (an image folder) and OUT (see hetpipe data --help)");
            return 2;
        }
        return data_pack(argv[rest], argv[rest + 1], o.shard_size, o.split);
    }
    if (strcmp(sub, "bench") == 0) {
        const char *dir = rest < argc ? argv[rest++] : o.data;
        if (rest < argc) {
            hp_error("data bench: unexpected argument '%s' (see hetpipe data --help)", argv[rest]);
            return 2;
        }
        return data_bench(dir, &o);
    }
    hp_error("data: unknown subcommand '%s' (allowed: check, pack, bench)", sub);
    return 2;
}
