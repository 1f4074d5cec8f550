/* test_ckpt.c - checkpoint files (runtime/ckpt.h): parts round-trip with their checksums, a
 * changed or cut byte is found, the manifest is checked whole, the newest valid checkpoint is
 * found and old ones pruned, --checkpoint-every is parsed, plans are compared. */
#include "ckpt.h"
#include "error.h"
#include "suites.h"
#include "util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A checkpoint directory DIR/ckpt-SEQ with one part (rank 0: two records), a plan.ini and a
 * manifest; its path in out. */
static void make_ckpt(const char *parent, long seq, char *out, size_t n)
{
    struct hp_ckpt_writer *w;
    struct hp_ckpt_info ci = {.seq = seq,
                              .nunits = 2,
                              .model_sig = 0x1234,
                              .seed = 7,
                              .batch = 64,
                              .ntrain = 6400,
                              .epochs = 3,
                              .epoch = 1,
                              .minibatch = 5,
                              .nvws = 1,
                              .nranks = 1,
                              .samples = 6720};
    float a[100];
    int64_t c[3] = {4, 5, 6};
    long got;
    char plan[4300];
    FILE *f;

    ck_assert_int_eq(hp_ckpt_new_dir(parent, seq - 1, &got, out, n), 0);
    ck_assert_int_eq(got, seq);
    for (int i = 0; i < 100; i++)
        a[i] = (float)i * 0.5f - 3.0f;
    ck_assert_int_eq(hp_ckpt_part_create(out, 0, &w), 0);
    ck_assert_int_eq(hp_ckpt_part_add(w, HP_CK_PARAMS, 0, 0, a, sizeof(a)), 0);
    ck_assert_int_eq(hp_ckpt_part_add(w, HP_CK_CLOCKS, 1, -1, c, sizeof(c)), 0);
    ci.names = calloc(2, sizeof(*ci.names));
    ci.bytes = calloc(2, sizeof(*ci.bytes));
    ci.crc = calloc(2, sizeof(*ci.crc));
    ck_assert_int_eq(hp_ckpt_part_close(w, &ci.bytes[0], &ci.crc[0]), 0);
    snprintf(ci.names[0], sizeof(ci.names[0]), "rank-0.part");
    snprintf(plan, sizeof(plan), "%s/src-plan.ini", parent);
    f = fopen(plan, "w");
    fputs("[plan]\nversion = 2\n", f);
    fclose(f);
    ck_assert_int_eq(hp_ckpt_copy_file(plan, out, "plan.ini", &ci.bytes[1], &ci.crc[1]), 0);
    snprintf(ci.names[1], sizeof(ci.names[1]), "plan.ini");
    ci.nfiles = 2;
    snprintf(ci.dir, sizeof(ci.dir), "%s", out);
    snprintf(ci.model, sizeof(ci.model), "cnn");
    snprintf(ci.reason, sizeof(ci.reason), "interval");
    ck_assert_int_eq(hp_ckpt_manifest_write(&ci), 0);
    hp_ckpt_info_release(&ci);
}

/* Remove what make_ckpt made under parent, and parent. */
static void cleanup(const char *parent)
{
    char path[4300];

    for (int seq = 1; seq <= 9; seq++) {
        snprintf(path, sizeof(path), "%s/ckpt-%d", parent, seq);
        hp_ckpt_remove(path);
    }
    snprintf(path, sizeof(path), "%s/src-plan.ini", parent);
    unlink(path);
    ck_assert_int_eq(rmdir(parent), 0);
}

static void flip_byte(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    int ch;

    ck_assert_ptr_nonnull(f);
    fseek(f, off, SEEK_SET);
    ch = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
}

START_TEST(part_round_trip_and_corruption)
{
    const char *parent = test_fresh_dir();
    char dir[4200], path[4300], why[512];
    struct hp_ckpt_reader *r;
    struct hp_ckpt_info ci;
    float a[100];
    int64_t c[3];

    make_ckpt(parent, 3, dir, sizeof(dir));
    ck_assert_int_eq(hp_ckpt_check(dir, 1, &ci, why, sizeof(why)), 0);
    ck_assert_int_eq(ci.seq, 3);
    ck_assert_int_eq(ci.epoch, 1);
    ck_assert_int_eq(ci.minibatch, 5);
    ck_assert_int_eq(ci.samples, 6720);
    ck_assert_str_eq(ci.model, "cnn");
    ck_assert(ci.model_sig == 0x1234);
    hp_ckpt_info_release(&ci);

    ck_assert_int_eq(hp_ckpt_part_open(dir, 0, &r), 0);
    ck_assert(hp_ckpt_part_has(r, HP_CK_PARAMS, 0));
    ck_assert(!hp_ckpt_part_has(r, HP_CK_PARAMS, 1));
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_PARAMS, 0, a, sizeof(a)), 0);
    ck_assert(a[7] == 0.5f);
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_CLOCKS, 1, c, sizeof(c)), 0);
    ck_assert(c[2] == 6);
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_PARAMS, 0, a, sizeof(a) - 4), -HP_EDATA);
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_MOMENTUM, 0, a, sizeof(a)), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "has no momentum of unit 0"));
    hp_ckpt_part_close_reader(r);

    /* one changed bit in a record's payload: the record's CRC and the file's */
    snprintf(path, sizeof(path), "%s/rank-0.part", dir);
    flip_byte(path, 24 + 24 + 40);
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), 0); /* sizes only */
    hp_ckpt_info_release(&ci);
    ck_assert_int_eq(hp_ckpt_check(dir, 1, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_str_eq(why, "rank-0.part fails its checksum (corrupt)");
    ck_assert_int_eq(hp_ckpt_part_open(dir, 0, &r), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_part_read(r, HP_CK_PARAMS, 0, a, sizeof(a)), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "fail their checksum"));
    hp_ckpt_part_close_reader(r);

    /* cut short */
    ck_assert_int_eq(truncate(path, 60), 0);
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(why, "rank-0.part has 60 bytes, the manifest says"));
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_part_open(dir, 0, &r), -HP_EDATA);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "is cut short"));
    cleanup(parent);
}
END_TEST

START_TEST(manifest_checked_whole)
{
    const char *parent = test_fresh_dir();
    char dir[4200], path[4300], why[512];
    struct hp_ckpt_info ci;
    FILE *f;

    make_ckpt(parent, 1, dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/manifest", dir);
    flip_byte(path, 60); /* inside the text: the checksum no longer matches */
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_str_eq(why, "the checksum does not match its contents");
    /* no checksum line: an incomplete manifest */
    f = fopen(path, "w");
    fputs("format = 1\nseq = 1\n", f);
    fclose(f);
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_str_eq(why, "no checksum line at the end (incomplete)");
    unlink(path);
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &ci, why, sizeof(why)), -HP_EDATA);
    ck_assert_str_eq(why, "it has no manifest (an incomplete checkpoint)");
    cleanup(parent);
}
END_TEST

START_TEST(latest_and_prune)
{
    const char *parent = test_fresh_dir();
    char d1[4200], d2[4200], d3[4200], d4[4200], path[4300];
    struct hp_ckpt_info ci;
    struct stat st;

    make_ckpt(parent, 1, d1, sizeof(d1));
    make_ckpt(parent, 2, d2, sizeof(d2));
    make_ckpt(parent, 3, d3, sizeof(d3));
    make_ckpt(parent, 4, d4, sizeof(d4));
    snprintf(path, sizeof(path), "%s/manifest", d4);
    unlink(path); /* the newest is incomplete: not a checkpoint */
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_latest(parent, &ci), 0);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "ckpt-4 is not valid (skipped)"));
    ck_assert_int_eq(ci.seq, 3);
    hp_ckpt_info_release(&ci);
    hp_ckpt_prune(parent, 2);
    ck_assert_int_eq(stat(d3, &st), 0);
    ck_assert_int_eq(stat(d2, &st), 0);
    ck_assert_int_ne(stat(d1, &st), 0);
    ck_assert_int_eq(stat(d4, &st), 0); /* newer than the newest valid: may be being written */
    /* a new one goes after all of them */
    long seq;
    ck_assert_int_eq(hp_ckpt_new_dir(parent, 0, &seq, path, sizeof(path)), 0);
    ck_assert_int_eq(seq, 5);
    ck_assert_int_eq(hp_ckpt_latest("/nonexistent/hetpipe", &ci), 1);
    cleanup(parent);
}
END_TEST

/* A manifest at the extremes reads back: 70,000 ranks' parts (a plan may have 65,536 GPUs
 * and their shards), a model name with '=' and '#', under a directory whose name holds every
 * printable character but '/' and a line break (the manifest's comment stays one line). */
START_TEST(manifest_extremes)
{
    enum { RANKS = 70000 };
    const char *fresh = test_fresh_dir();
    char parent[3900], dir[4000], path[4300], why[512];
    struct hp_ckpt_info ci = {.seq = 1,
                              .nunits = 4096,
                              .model_sig = 0xfeedULL,
                              .batch = 32,
                              .nvws = 65536,
                              .nranks = RANKS,
                              .samples = 1};
    struct hp_ckpt_info back;
    size_t len = (size_t)snprintf(parent, sizeof(parent), "%s/", fresh);
    long seq;

    for (int c = ' '; c <= '~'; c++)
        if (c != '/')
            parent[len++] = (char)c;
    parent[len++] = '\n';
    snprintf(parent + len, sizeof(parent) - len, "end");
    ck_assert_int_eq(hp_ckpt_new_dir(parent, 0, &seq, dir, sizeof(dir)), 0);
    ci.names = calloc(RANKS + 1, sizeof(*ci.names));
    ci.bytes = calloc(RANKS + 1, sizeof(*ci.bytes));
    ci.crc = calloc(RANKS + 1, sizeof(*ci.crc));
    ck_assert(ci.names && ci.bytes && ci.crc);
    for (int r = 0; r <= RANKS; r++) {
        if (r < RANKS)
            snprintf(ci.names[r], sizeof(ci.names[r]), "rank-%d.part", r);
        else
            snprintf(ci.names[r], sizeof(ci.names[r]), "plan.ini");
        snprintf(path, sizeof(path), "%s/%s", dir, ci.names[r]);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f); /* empty: 0 bytes, CRC-32 0 */
    }
    ci.nfiles = RANKS + 1;
    snprintf(ci.dir, sizeof(ci.dir), "%s", dir);
    snprintf(ci.model, sizeof(ci.model), "my = model #2; v1.0 ");
    snprintf(ci.reason, sizeof(ci.reason), "signal");
    ck_assert_int_eq(hp_ckpt_manifest_write(&ci), 0);
    ck_assert_msg(hp_ckpt_check(dir, 1, &back, why, sizeof(why)) == 0, "%s", why);
    ck_assert_int_eq(back.nfiles, RANKS + 1);
    ck_assert_int_eq(back.nranks, RANKS);
    ck_assert_int_eq(back.nvws, 65536);
    ck_assert_int_eq(back.nunits, 4096);
    ck_assert_str_eq(back.model, ci.model);
    ck_assert_str_eq(back.names[RANKS - 1], "rank-69999.part");
    hp_ckpt_info_release(&back);

    /* what no manifest line holds is refused, the manifest there kept */
    snprintf(ci.model, sizeof(ci.model), "two\nlines");
    test_capture_begin();
    ck_assert_int_eq(hp_ckpt_manifest_write(&ci), -HP_EINVAL);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "(one line)"));
    ck_assert_int_eq(hp_ckpt_check(dir, 0, &back, why, sizeof(why)), 0);
    hp_ckpt_info_release(&back);
    hp_ckpt_info_release(&ci);
    hp_ckpt_remove(dir);
    ck_assert_int_eq(rmdir(parent), 0);
    ck_assert_int_eq(rmdir(fresh), 0);
}
END_TEST

Suite *suite_ckpt(void)
{
    Suite *s = suite_create("ckpt");
    TCase *tc = tcase_create("files");

    tcase_add_test(tc, part_round_trip_and_corruption);
    tcase_add_test(tc, manifest_checked_whole);
    tcase_add_test(tc, latest_and_prune);
    suite_add_tcase(s, tc);
    /* 70,000 files made and checked: seconds, more under a sanitizer */
    tc = tcase_create("extremes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, manifest_extremes);
    suite_add_tcase(s, tc);
    return s;
}
