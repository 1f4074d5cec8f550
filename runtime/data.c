/* data.c - reading Fashion-MNIST's gzip IDX files with zlib. */
#include "data.h"
#include "rng.h"

#include "error.h"
#include "infile.h"
#include "log.h"
#include "options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define INSTALL_HINT "install it with: apt-get install dataset-fashion-mnist"
#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u

static const float mnist_mean = 0.2860f, mnist_std = 0.3530f;

const char *hp_data_dir_or(const char *dir, const char *fallback)
{
    struct hp_options e = {.data = NULL};
    char err[512];

    if (dir && *dir)
        return dir;
    if (hp_opt_env(&e, HP_OPT_DATA, err, sizeof(err)) == 0) /* any non-empty text is one */
        return e.data;
    return fallback;
}

const char *hp_dataset_dir(const char *dir)
{
    return hp_data_dir_or(dir, HP_FASHION_MNIST_DIR);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read exactly n bytes; 0 on success, else an error message in err. */
static int read_exact(gzFile f, void *buf, size_t n, const char **err)
{
    unsigned char *p = buf;
    int zerr;

    while (n > 0) {
        unsigned chunk = n > (1u << 30) ? 1u << 30 : (unsigned)n;
        int got = gzread(f, p, chunk);
        if (got < 0) {
            *err = gzerror(f, &zerr);
            return -1;
        }
        if (got == 0) {
            *err = "file is truncated";
            return -1;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* Open one IDX file and read its header: `ndims` dimensions after the magic into dims[].
 * *f: the stream at the payload. 0 or -HP_EDATA (logged, naming the file). */
static int idx_header(const char *path, uint32_t magic, int ndims, uint32_t *dims, gzFile *out)
{
    unsigned char hdr[16];
    const char *err = NULL;
    struct stat st;
    const int fd = hp_infile_open(path, 0, &st);
    gzFile f = fd >= 0 ? gzdopen(fd, "rb") : NULL;

    if (!f) {
        int e = fd < 0 ? fd : -HP_ENOMEM;
        if (fd >= 0)
            close(fd);
        hp_error("data file '%s': %s; %s", path, e == -ENOENT ? "not found" : hp_infile_why(e, &st),
                 INSTALL_HINT);
        return -HP_EDATA;
    }
    if (read_exact(f, hdr, 4 + 4 * (size_t)ndims, &err)) {
        hp_error("data file '%s': %s; the file is corrupt, reinstall it with: apt-get install "
                 "--reinstall dataset-fashion-mnist",
                 path, err);
        gzclose(f);
        return -HP_EDATA;
    }
    if (be32(hdr) != magic) {
        hp_error("data file '%s': bad magic number 0x%08x (expected 0x%08x, an IDX %s file); "
                 "the file is corrupt, reinstall it with: apt-get install --reinstall "
                 "dataset-fashion-mnist",
                 path, be32(hdr), magic, magic == IDX_IMAGES ? "image" : "label");
        gzclose(f);
        return -HP_EDATA;
    }
    for (int i = 0; i < ndims; i++)
        dims[i] = be32(hdr + 4 + 4 * i);
    *out = f;
    return 0;
}

/* Read one IDX file: header of `ndims` dimensions after the magic, then the payload.
 * On success *data is a new buffer of the payload and dims[] holds the sizes. */
static int read_idx(const char *path, uint32_t magic, int ndims, uint32_t *dims,
                    unsigned char **data, size_t *bytes)
{
    unsigned char extra;
    const char *err = NULL;
    unsigned char *buf = NULL;
    size_t n = 1;
    gzFile f;
    int rc = idx_header(path, magic, ndims, dims, &f);

    if (rc)
        return rc;
    for (int i = 0; i < ndims; i++)
        n *= dims[i];
    if (n == 0 || n > ((size_t)1 << 34)) {
        err = "implausible sizes in the header";
        goto bad;
    }
    buf = malloc(n);
    if (!buf) {
        gzclose(f);
        return -HP_ENOMEM;
    }
    if (read_exact(f, buf, n, &err))
        goto bad;
    if (gzread(f, &extra, 1) != 0) {
        err = "trailing data after the last sample";
        goto bad;
    }
    gzclose(f);
    *data = buf;
    *bytes = n;
    return 0;
bad:
    hp_error("data file '%s': %s; the file is corrupt, reinstall it with: apt-get install "
             "--reinstall dataset-fashion-mnist",
             path, err);
    free(buf);
    gzclose(f);
    return -HP_EDATA;
}

/* The two files' headers agree: 28x28 images, as many labels as images. */
static int idx_check_dims(const char *ipath, const char *lpath, const uint32_t *idims,
                          const uint32_t *ldims)
{
    if (idims[1] != 28 || idims[2] != 28) {
        hp_error("data file '%s': images are %ux%u, expected 28x28", ipath, idims[1], idims[2]);
        return -HP_EDATA;
    }
    if (idims[0] != ldims[0] || idims[0] == 0 || idims[0] > INT32_MAX / 784) {
        hp_error("data files '%s' and '%s': %u images and %u labels, expected as many labels as "
                 "images (at least one)",
                 ipath, lpath, idims[0], ldims[0]);
        return -HP_EDATA;
    }
    return 0;
}

int hp_dataset_count(const char *dir, int train, long *n)
{
    const char *base = hp_dataset_dir(dir), *split = train ? "train" : "t10k";
    char ipath[4096], lpath[4096];
    uint32_t idims[3], ldims[1];
    gzFile f;
    int rc;

    snprintf(ipath, sizeof(ipath), "%s/%s-images-idx3-ubyte.gz", base, split);
    snprintf(lpath, sizeof(lpath), "%s/%s-labels-idx1-ubyte.gz", base, split);
    if ((rc = idx_header(ipath, IDX_IMAGES, 3, idims, &f)))
        return rc;
    gzclose(f);
    if ((rc = idx_header(lpath, IDX_LABELS, 1, ldims, &f)))
        return rc;
    gzclose(f);
    if ((rc = idx_check_dims(ipath, lpath, idims, ldims)))
        return rc;
    *n = idims[0];
    return 0;
}

int hp_dataset_load_fashion_mnist(const char *dir, int train, struct hp_dataset *out)
{
    const char *base = hp_dataset_dir(dir), *split = train ? "train" : "t10k";
    char ipath[4096], lpath[4096];
    uint32_t idims[3], ldims[1];
    unsigned char *img = NULL, *lab = NULL;
    size_t ib, lb;
    struct hp_dataset d = {0};
    int rc;

    snprintf(ipath, sizeof(ipath), "%s/%s-images-idx3-ubyte.gz", base, split);
    snprintf(lpath, sizeof(lpath), "%s/%s-labels-idx1-ubyte.gz", base, split);
    rc = read_idx(ipath, IDX_IMAGES, 3, idims, &img, &ib);
    if (rc)
        return rc;
    rc = read_idx(lpath, IDX_LABELS, 1, ldims, &lab, &lb);
    if (rc)
        goto out;
    rc = idx_check_dims(ipath, lpath, idims, ldims);
    if (rc)
        goto out;
    rc = -HP_EDATA;
    for (uint32_t i = 0; i < ldims[0]; i++) {
        if (lab[i] > 9) {
            hp_error("data file '%s': label %u of sample %u is not a class 0..9", lpath, lab[i], i);
            goto out;
        }
    }
    d.n = (int)idims[0];
    d.c = 1;
    d.h = 28;
    d.w = 28;
    d.classes = 10;
    d.images = malloc(ib * sizeof(float));
    d.labels = malloc((size_t)d.n * sizeof(int32_t));
    if (!d.images || !d.labels) {
        hp_dataset_release(&d);
        rc = -HP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < ib; i++)
        d.images[i] = ((float)img[i] / 255.0f - mnist_mean) / mnist_std;
    for (int i = 0; i < d.n; i++)
        d.labels[i] = lab[i];
    *out = d;
    rc = 0;
out:
    free(img);
    free(lab);
    return rc;
}

void hp_dataset_release(struct hp_dataset *d)
{
    free(d->images);
    free(d->labels);
    d->images = NULL;
    d->labels = NULL;
    d->n = 0;
}

void hp_dataset_gather(const struct hp_dataset *d, const int *idx, int n, float *images,
                       int32_t *labels)
{
    const size_t sz = (size_t)d->c * d->h * d->w;

    for (int i = 0; i < n; i++) {
        memcpy(images + (size_t)i * sz, d->images + (size_t)idx[i] * sz, sz * sizeof(float));
        labels[i] = d->labels[idx[i]];
    }
}

/* Seeded Fisher-Yates permutation of 0..n-1 for one epoch. */
void hp_permute(int *idx, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++)
        idx[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(hp_rng_u64(seed, (uint64_t)i) % (uint64_t)(i + 1));
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}
