/* Sizes and types of the heat kernel: a -D on the command line picks a data set. */
#ifndef HEAT_H
#define HEAT_H

#if !defined(TINY) && !defined(BIG)
# define BIG
#endif

#ifdef TINY
# define STEPS 4
# define SIZE 16
#endif
#ifdef BIG
# define STEPS 100
# define SIZE 1000
#endif

#ifndef SHIFT
# define SHIFT 1
#endif

#define REAL float
#define CONST(x) x##f
#define _B_SIZE KB_BOUND(SIZE, n)
#define _B_STEPS KB_BOUND(STEPS, steps)

#endif
