/* heat.c: a loclab test fixture written in the style of a PolyBench kernel. */
#include <stdio.h>
#include <math.h>
#include <kbench.h>
#include "heat.h"

static void init(int n, REAL KB_2D(A, SIZE, SIZE, n, n))
{
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      A[i][j] = (REAL) (i + j) / n;
}

static inline void
kernel_heat(int steps, int n,
            REAL KB_2D(A, SIZE, SIZE, n, n),
            REAL KB_2D(B, SIZE, SIZE, n, n),
            REAL * __restrict__ edge) __attribute__((noinline));

static inline void
kernel_heat(int steps, int n,
            REAL KB_2D(A, SIZE, SIZE, n, n),
            REAL KB_2D(B, SIZE, SIZE, n, n),
            REAL * __restrict__ edge)
{
  int t, i, j;
  REAL lo, hi;
  printf("not analyzed: outside the scop\n");
#pragma scop
  lo = hi = CONST(0.25);
  for (t = 0; t < _B_STEPS; t++) {
    for (i = 1; i < _B_SIZE - 1; i++)
      for (j = 1; j < _B_SIZE - 1; j++)
        B[i][j] = lo * (A[i - 1][j] + A[i + 1][j]) + hi * (A[i][j - 1] + A[i][j + 1]);
    for (i = 1; i < _B_SIZE - 1; i++)
      for (j = 1; j < _B_SIZE - 1; j++)
        A[i][j] = B[i][j];
  }
  for (i = SHIFT; i < _B_SIZE; i++)
    edge[i] = edge[i - SHIFT] + A[i][0];
#pragma endscop
}

int main(void)
{
  int n = SIZE;
  KB_ALLOC_2D(A, REAL, SIZE, SIZE);
  KB_ALLOC_2D(B, REAL, SIZE, SIZE);
  REAL edge[SIZE];
  init(n, A);
  kb_start();
  kernel_heat(STEPS, n, A, B, edge);
  kb_stop();
  return 0;
}
