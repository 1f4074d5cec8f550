/* main.c - the unit test runner (Check). Each test_*.c contributes one suite. */
#include "suites.h"

#include <check.h>
#include <stdlib.h>

int main(void)
{
    SRunner *sr = srunner_create(suite_common());
    int failed;

    srunner_add_suite(sr, suite_layers());
    srunner_add_suite(sr, suite_model());
    srunner_add_suite(sr, suite_data());
    srunner_add_suite(sr, suite_train());
    srunner_add_suite(sr, suite_cluster());
    srunner_add_suite(sr, suite_partition());
    srunner_add_suite(sr, suite_plan());
    srunner_add_suite(sr, suite_comm());
    srunner_add_suite(sr, suite_bootstrap());
    srunner_add_suite(sr, suite_allreduce());
    srunner_add_suite(sr, suite_options());
    srunner_add_suite(sr, suite_ckpt());
    srunner_add_suite(sr, suite_worker());
    srunner_add_suite(sr, suite_ps());
    srunner_add_suite(sr, suite_image());
    srunner_add_suite(sr, suite_source());
    srunner_add_suite(sr, suite_text());
    srunner_add_suite(sr, suite_optim());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
