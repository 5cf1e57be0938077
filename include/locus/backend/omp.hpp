#pragma once
// OpenMP reaches locus's code through this one macro (as Thrust's through its pragma_omp.h):
// LOCUS_PRAGMA_OMP(parallel for schedule(static)) is the directive in an OpenMP build and nothing
// otherwise, so no file needs its own #if around a pragma.
#define LOCUS_PRAGMA_STRING(text) #text
#if defined(_OPENMP)
#  define LOCUS_PRAGMA_OMP(directive) _Pragma(LOCUS_PRAGMA_STRING(omp directive))
#else
#  define LOCUS_PRAGMA_OMP(directive)
#endif
