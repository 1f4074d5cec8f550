/* allreduce.c - ring allreduce over hp_comm (being written). */
#include "allreduce.h"
