/* test_common.c - error codes, strict number parsing, strict INI loading, other processes'
 * state. */
#include "suites.h"
#include "util.h"

#include "error.h"
#include "infile.h"
#include "ini.h"
#include "log.h"
#include "parse.h"
#include "process.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

START_TEST(strerror_codes)
{
    ck_assert_str_eq(hp_strerror(0), "success");
    ck_assert_str_eq(hp_strerror(-HP_ECONFIG), "invalid configuration");
    ck_assert_str_eq(hp_strerror(-HP_EDATA), "invalid or missing data file");
    ck_assert_str_eq(hp_strerror(-ENOENT), strerror(ENOENT));
    ck_assert_str_eq(hp_errname(-HP_EMODEL), "HP_EMODEL");
    /* every code has its own message */
    for (int a = HP_EBASE + 1; a < HP_ELAST; a++)
        for (int b = a + 1; b < HP_ELAST; b++)
            ck_assert_str_ne(hp_strerror(-a), hp_strerror(-b));
}
END_TEST

START_TEST(parse_numbers_strictly)
{
    long v = 5;
    double d = 1.0;

    ck_assert_int_eq(hp_parse_long("12", 0, 100, &v), 0);
    ck_assert_int_eq(v, 12);
    ck_assert_int_eq(hp_parse_long("08", 0, 100, &v), 0); /* decimal, not octal */
    ck_assert_int_eq(v, 8);
    ck_assert_int_eq(hp_parse_long("12x", 0, 100, &v), -HP_EINVAL);
    ck_assert_int_eq(hp_parse_long("", 0, 100, &v), -HP_EINVAL);
    ck_assert_int_eq(hp_parse_long("x", 0, 100, &v), -HP_EINVAL);
    ck_assert_int_eq(hp_parse_long("-1", 0, 100, &v), -HP_ERANGE);
    ck_assert_int_eq(hp_parse_long("99999999999999999999", 0, 100, &v), -HP_ERANGE);
    ck_assert_int_eq(v, 8); /* untouched on error */
    ck_assert_int_eq(hp_parse_double("0.5", 0, 1, &d), 0);
    ck_assert_double_eq(d, 0.5);
    ck_assert_int_eq(hp_parse_double("0.5.1", 0, 1, &d), -HP_EINVAL);
    ck_assert_int_eq(hp_parse_double("nan", 0, 1, &d), -HP_EINVAL);
    ck_assert_int_eq(hp_parse_double("2", 0, 1, &d), -HP_ERANGE);
    /* one rule for every number hetpipe reads: the whole string, decimal, no blanks or '+' */
    for (const char *const *j = (const char *const[]){" 1", "1 ", "+1", "-", "--1", "0x10", "1e3",
                                                      "1.0", "-+1", "\t1", NULL};
         *j; j++)
        ck_assert_msg(hp_parse_long(*j, -100, 100, &v) == -HP_EINVAL, "'%s' accepted", *j);
    for (const char *const *j =
             (const char *const[]){" 0.5", "0.5 ", "+0.5", "0x1p-1", "inf", "-inf", "e1", "", NULL};
         *j; j++)
        ck_assert_msg(hp_parse_double(*j, -1, 1, &d) == -HP_EINVAL, "'%s' accepted", *j);
    ck_assert_int_eq(hp_parse_long("-7", -100, 100, &v), 0);
    ck_assert_int_eq(v, -7);
    ck_assert_int_eq(hp_parse_double("-.5e-1", -1, 1, &d), 0);
    ck_assert_double_eq(d, -0.05);
    ck_assert_int_eq(hp_parse_double("1e-400", -1, 1, &d), -HP_ERANGE);
}
END_TEST

START_TEST(device_lists)
{
    char buf[8];

    ck_assert_int_eq(hp_list_find("0,1,3", 3), 2);
    ck_assert_int_eq(hp_list_find("0,1,3", 2), -1);
    ck_assert_int_eq(hp_list_find("", 0), -1);
    ck_assert_int_eq(hp_list_find("x,01", 1), 1);
    ck_assert_int_eq(hp_list_entry("4,5,GPU-abc", 2, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "GPU-abc");
    ck_assert_int_eq(hp_list_entry("4,5", 2, buf, sizeof(buf)), -1);
    ck_assert_int_eq(hp_list_entry("4,,5", 1, buf, sizeof(buf)), -1);
    ck_assert_int_eq(hp_list_entry("GPU-0123456789", 0, buf, sizeof(buf)), -1); /* too long */
}
END_TEST

START_TEST(ini_unknown_key_named)
{
    struct hp_ini *ini;
    static const char *const allowed[] = {"alpha", "beta", NULL};
    const char *p = test_write_file("a.ini", "[sec]\nalpha = 1\ngamma = 2\n");
    const char *err;

    ck_assert_int_eq(hp_ini_load(p, &ini), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_ini_check_keys(ini, "sec", allowed), -HP_ECONFIG);
    err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "a.ini"));
    ck_assert_ptr_nonnull(strstr(err, "[sec]"));
    ck_assert_ptr_nonnull(strstr(err, "'gamma'"));
    ck_assert_ptr_nonnull(strstr(err, "alpha, beta"));
    hp_ini_destroy(ini);
}
END_TEST

START_TEST(ini_numbers_and_ranges)
{
    struct hp_ini *ini;
    const char *p = test_write_file("b.ini", "[s]\nn = 12x\nm = 7\nf = 0.25\nb = maybe\n"
                                             "e = red\nz = 1e999\n");
    const char *err;
    long v = -1;
    double d;
    int b, e;

    ck_assert_int_eq(hp_ini_load(p, &ini), 0);
    test_capture_begin();
    ck_assert_int_eq(hp_ini_get_long(ini, "s", "n", 1, 0, 0, 100, &v), -HP_ECONFIG);
    err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "key 'n'"));
    ck_assert_ptr_nonnull(strstr(err, "'12x' is not an integer"));
    ck_assert_int_eq(v, -1);
    test_capture_begin();
    ck_assert_int_eq(hp_ini_get_long(ini, "s", "m", 1, 0, 0, 5, &v), -HP_ECONFIG);
    err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "out of range (allowed: 0 to 5)"));
    ck_assert_int_eq(hp_ini_get_long(ini, "s", "m", 1, 0, 0, 10, &v), 0);
    ck_assert_int_eq(v, 7);
    ck_assert_int_eq(hp_ini_get_long(ini, "s", "absent", 0, 3, 0, 10, &v), 0);
    ck_assert_int_eq(v, 3);
    test_capture_begin();
    ck_assert_int_eq(hp_ini_get_long(ini, "s", "absent", 1, 3, 0, 10, &v), -HP_ECONFIG);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "missing required key 'absent'"));
    ck_assert_int_eq(hp_ini_get_double(ini, "s", "f", 1, 0, 0, 1, &d), 0);
    ck_assert_double_eq(d, 0.25);
    test_capture_begin();
    ck_assert_int_eq(hp_ini_get_double(ini, "s", "z", 1, 0, 0, 1, &d), -HP_ECONFIG);
    ck_assert_int_eq(hp_ini_get_bool(ini, "s", "b", 1, 0, &b), -HP_ECONFIG);
    static const char *const colours[] = {"green", "blue", NULL};
    ck_assert_int_eq(hp_ini_get_enum(ini, "s", "e", 1, 0, colours, &e), -HP_ECONFIG);
    err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "not a boolean"));
    ck_assert_ptr_nonnull(strstr(err, "unknown value 'red' (allowed: green, blue)"));
    hp_ini_destroy(ini);
}
END_TEST

START_TEST(ini_missing_and_broken_files)
{
    struct hp_ini *ini = NULL;
    const char *err;

    test_capture_begin();
    ck_assert_int_eq(hp_ini_load("/nonexistent/x.ini", &ini), -ENOENT);
    err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.ini"));
    ck_assert_ptr_null(ini);
    const char *p = test_write_file("c.ini", "[s\nkey = 1\n");
    test_capture_begin();
    ck_assert_int_eq(hp_ini_load(p, &ini), -HP_ECONFIG);
    err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "c.ini"));
    ck_assert_ptr_null(ini);
}
END_TEST

START_TEST(ini_refuses_what_iniparser_hides)
{
    struct hp_ini *ini = NULL;
    const char *err, *p;

    p = test_write_file("d1.ini", "[a]\nx = 1\ny = 2\nX = 3\n");
    test_capture_begin();
    ck_assert_int_eq(hp_ini_load(p, &ini), -HP_ECONFIG);
    err = test_capture_end();
    ck_assert_ptr_nonnull(strstr(err, "line 4: [a]: key 'x' appears again (first at line 2)"));
    p = test_write_file("d2.ini", "x = 1\n[a]\ny = 2\n");
    test_capture_begin();
    ck_assert_int_eq(hp_ini_load(p, &ini), -HP_ECONFIG);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "key 'x' before any [section]"));
    p = test_write_file("d3.ini", "[a]\nx = 1\n[b]\nx = 1\n[ A ]\n");
    test_capture_begin();
    ck_assert_int_eq(hp_ini_load(p, &ini), -HP_ECONFIG);
    ck_assert_ptr_nonnull(strstr(test_capture_end(), "section [a] appears again"));
    p = test_write_file("d4.ini", "; comment = not a key\n[a]\nx = 1\n[b]\nx = 2\n");
    ck_assert_int_eq(hp_ini_load(p, &ini), 0);
    hp_ini_destroy(ini);
}
END_TEST

/* A process stopped by SIGSTOP is stopped; one in a tracer's stop is not (LeakSanitizer
 * freezes an exiting sanitizer build's threads so, and hetpipe run took such a rank for the
 * cause of a failure). */
START_TEST(pid_stopped_by_a_signal_not_by_a_tracer)
{
    int st;
    pid_t c = fork();

    ck_assert_int_ge(c, 0);
    if (c == 0) {
        for (;;)
            pause();
    }
    ck_assert(!hp_pid_stopped(c));
    kill(c, SIGSTOP);
    ck_assert_int_eq(waitpid(c, &st, WUNTRACED), c);
    ck_assert(WIFSTOPPED(st));
    ck_assert(hp_pid_stopped(c));
    kill(c, SIGKILL);
    waitpid(c, &st, 0);
    ck_assert(!hp_pid_stopped(c)); /* gone */

    c = fork();
    ck_assert_int_ge(c, 0);
    if (c == 0) {
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(3);
        raise(SIGSTOP); /* a signal-delivery stop under the tracer: state t */
        _exit(0);
    }
    ck_assert_int_eq(waitpid(c, &st, 0), c);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
        return; /* ptrace not allowed here */
    ck_assert(WIFSTOPPED(st));
    ck_assert(!hp_pid_stopped(c));
    kill(c, SIGKILL);
    waitpid(c, &st, 0);
}
END_TEST

/* A rank's exit status through the run directory, as hetpipe launch reads it. */
START_TEST(rank_exit_files)
{
    const char *dir = test_fresh_dir();
    char path[4200];
    int st = -1;

    ck_assert_int_eq(hp_rank_exit_read(dir, 3, &st), -1); /* not ended yet */
    ck_assert_int_eq(hp_rank_exit_write(dir, 3, 75), 0);
    ck_assert_int_eq(hp_rank_exit_read(dir, 3, &st), 0);
    ck_assert_int_eq(st, 75);
    ck_assert_int_eq(hp_rank_exit_write(dir, 3, 0), -1); /* never replaced */
    snprintf(path, sizeof(path), "%s/rank-4.exit", dir);
    FILE *f = fopen(path, "w");
    fputs("seventy\n", f);
    fclose(f);
    ck_assert_int_eq(hp_rank_exit_read(dir, 4, &st), -1); /* not a status */
    snprintf(path, sizeof(path), "%s/rank-5.exit", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(hp_rank_exit_read(dir, 5, &st), -1); /* a FIFO: refused, not waited on */
    test_remove_dir(dir);
}
END_TEST

/* Every reader's open: a regular file only, a FIFO refused without waiting for a writer (the
 * test's timeout would catch a wait), a link refused where hetpipe wrote the file. */
START_TEST(infile_regular_files_only)
{
    const char *dir = test_fresh_dir();
    char reg[4200], fifo[4200], link[4200], why[256];
    struct stat st;
    int err = 0;

    snprintf(reg, sizeof(reg), "%s/reg.ini", dir);
    snprintf(fifo, sizeof(fifo), "%s/fifo.ini", dir);
    snprintf(link, sizeof(link), "%s/link.ini", dir);
    FILE *f = fopen(reg, "w");
    fputs("[a]\nb = 1\n", f);
    fclose(f);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(symlink(reg, link), 0);

    int fd = hp_infile_open(reg, HP_INFILE_NOFOLLOW, &st);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0); /* back to blocking reads */
    close(fd);
    ck_assert_int_eq(hp_infile_open(fifo, 0, &st), -HP_ENOTREG);
    ck_assert_str_eq(hp_infile_why(-HP_ENOTREG, &st), "it is a FIFO, not a regular file");
    ck_assert_int_eq(hp_infile_open(dir, 0, &st), -HP_ENOTREG);
    ck_assert_str_eq(hp_infile_kind(&st), "a directory");
    ck_assert_int_eq(hp_infile_open("/dev/null", 0, &st), -HP_ENOTREG);
    ck_assert_str_eq(hp_infile_kind(&st), "a character device");
    ck_assert_int_eq(hp_infile_open(link, HP_INFILE_NOFOLLOW, &st), -HP_ENOTREG);
    ck_assert_str_eq(hp_infile_why(-HP_ENOTREG, &st), "it is a symbolic link, not a regular file");
    fd = hp_infile_open(link, 0, &st); /* followed where the user names the file */
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_ptr_null(hp_infile_fopen("/nonexistent/x", 0, NULL, &err));
    ck_assert_int_eq(err, -ENOENT);

    /* the INI reader: a FIFO is named, not waited on */
    struct hp_ini *ini = NULL;
    hp_log_capture(why, sizeof(why));
    ck_assert_int_eq(hp_ini_load(fifo, &ini), -HP_ENOTREG);
    hp_log_capture(NULL, 0);
    ck_assert_ptr_nonnull(strstr(why, "it is a FIFO, not a regular file"));
    ck_assert_int_eq(hp_ini_load(link, &ini), 0);
    hp_ini_destroy(ini);
    /* iniparser reads the checked descriptor; its message names the file as given */
    f = fopen(reg, "w");
    fputs("[a]\nthis is bad\n", f);
    fclose(f);
    hp_log_capture(why, sizeof(why));
    ck_assert_int_eq(hp_ini_load(reg, &ini), -HP_ECONFIG);
    hp_log_capture(NULL, 0);
    ck_assert_msg(strstr(why, "syntax error in ") && strstr(strstr(why, "syntax error in "), reg) &&
                      !strstr(why, "/proc/self/fd"),
                  "why: %s", why);
    test_remove_dir(dir);
}
END_TEST

/* The whole record: signal and blame lines round-trip; the status line stays what
 * hp_rank_exit_read reads; a heartbeat moves and is never taken from a file it did not make. */
START_TEST(rank_exit_records_and_heartbeats)
{
    const char *dir = test_fresh_dir();
    struct hp_rank_exit e = {.status = 143, .signal = 15, .blame = -1}, back;
    char path[4200], name[32];
    unsigned long c = 7;
    int st = -1;

    ck_assert_int_eq(hp_rank_exit_save(dir, 0, &e), 0);
    ck_assert_int_eq(hp_rank_exit_load(dir, 0, &back), 0);
    ck_assert_int_eq(back.status, 143);
    ck_assert_int_eq(back.signal, 15);
    ck_assert_int_eq(back.blame, -1);
    e = (struct hp_rank_exit){.status = 1, .blame = 6};
    snprintf(e.why, sizeof(e.why), "stopped (SIGSTOP) for more than 2 s\nand more");
    ck_assert_int_eq(hp_rank_exit_save(dir, 1, &e), 0);
    ck_assert_int_eq(hp_rank_exit_read(dir, 1, &st), 0);
    ck_assert_int_eq(st, 1);
    ck_assert_int_eq(hp_rank_exit_load(dir, 1, &back), 0);
    ck_assert_int_eq(back.blame, 6);
    ck_assert_int_eq(back.signal, 0);
    ck_assert_str_eq(back.why, "stopped (SIGSTOP) for more than 2 s"); /* one line */
    ck_assert_int_eq(hp_rank_exit_save(dir, 1, &e), -1);                /* never replaced */
    ck_assert_str_eq(hp_signal_name(SIGKILL, name, sizeof(name)), "SIGKILL");
    ck_assert_str_eq(hp_signal_name(SIGSTOP, name, sizeof(name)), "SIGSTOP");
    ck_assert_str_eq(hp_signal_name(SIGRTMIN + 1, name, sizeof(name)) == name ? "x" : "y", "x");
    /* heartbeats */
    ck_assert_int_eq(hp_rank_beat_read(dir, 2, &c), -1);
    ck_assert_int_eq(hp_rank_beat_create(dir, 2, path, sizeof(path)), 0);
    ck_assert_int_eq(hp_rank_beat_read(dir, 2, &c), 0);
    ck_assert_uint_eq(c, 0);
    ck_assert_int_eq(hp_rank_beat(path, 12345), 0);
    ck_assert_int_eq(hp_rank_beat_read(dir, 2, &c), 0);
    ck_assert_uint_eq(c, 12345);
    ck_assert_int_eq(hp_rank_beat_create(dir, 2, path, sizeof(path)), -1); /* exists */
    ck_assert_int_eq(errno, EEXIST);
    test_remove_dir(dir);
}
END_TEST

/* What a message quotes from a file reaches a terminal escaped. */
START_TEST(control_characters_escaped)
{
    char buf[64], got[256];

    ck_assert_str_eq(hp_str_escape("a\x1b[2Jb\r\n\x7f", buf, sizeof(buf)),
                     "a\\x1b[2Jb\\x0d\\x0a\\x7f");
    ck_assert_str_eq(hp_str_escape("\x01\x01\x01\x01\x01\x01", buf, 16), "\\x01\\x01...");
    hp_log_capture(got, sizeof(got));
    hp_error("key '%s'", "k\x1b]0;owned\x07\n");
    hp_log_capture(NULL, 0);
    ck_assert_str_eq(got, "key 'k\\x1b]0;owned\\x07\\x0a'");
}
END_TEST

Suite *suite_common(void)
{
    Suite *s = suite_create("common");
    TCase *t = tcase_create("common");

    tcase_add_test(t, strerror_codes);
    tcase_add_test(t, parse_numbers_strictly);
    tcase_add_test(t, device_lists);
    tcase_add_test(t, ini_unknown_key_named);
    tcase_add_test(t, ini_numbers_and_ranges);
    tcase_add_test(t, ini_missing_and_broken_files);
    tcase_add_test(t, ini_refuses_what_iniparser_hides);
    tcase_add_test(t, pid_stopped_by_a_signal_not_by_a_tracer);
    tcase_add_test(t, rank_exit_files);
    tcase_add_test(t, infile_regular_files_only);
    tcase_add_test(t, control_characters_escaped);
    tcase_add_test(t, rank_exit_records_and_heartbeats);
    suite_add_tcase(s, t);
    return s;
}
