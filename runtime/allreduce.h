/* allreduce.h - ring allreduce over hp_comm (being written). */
#ifndef HP_ALLREDUCE_H
#define HP_ALLREDUCE_H
#endif
