/* A small benchmark harness header in the style of PolyBench's utilities: arrays are
   declared through macros, loop bounds too. Found through -I, as <kbench.h>. */
#ifndef KBENCH_H
#define KBENCH_H

#include <stdlib.h>

#ifdef KBENCH_FIXED_BOUNDS
# define KB_BOUND(fixed, runtime) fixed
#else
# define KB_BOUND(fixed, runtime) runtime
#endif

#define KB_1D(name, n1, r1) name[n1]
#define KB_2D(name, n1, n2, r1, r2) name[n1][n2]
#define KB_ALLOC_2D(name, type, n1, n2) \
  type (*name)[n2] = (type (*)[n2]) malloc(sizeof(type) * (n1) * (n2))

void kb_start(void);
void kb_stop(void);

#endif
