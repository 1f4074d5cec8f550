/* suites.h - the unit test suites, one per test_*.c. */
#ifndef HP_TEST_SUITES_H
#define HP_TEST_SUITES_H

#include <check.h>

Suite *suite_common(void);
Suite *suite_layers(void);
Suite *suite_model(void);
Suite *suite_data(void);
Suite *suite_train(void);
Suite *suite_cluster(void);
Suite *suite_partition(void);
Suite *suite_plan(void);
Suite *suite_comm(void);
Suite *suite_allreduce(void);
Suite *suite_bootstrap(void);
Suite *suite_options(void);
Suite *suite_ckpt(void);
Suite *suite_worker(void);
Suite *suite_ps(void);
Suite *suite_image(void);
Suite *suite_source(void);
Suite *suite_text(void);
Suite *suite_optim(void);

#endif
