// A float does not become a 16-bit float implicitly (as std::float16_t: the conversion rounds, so
// it is written).
// expect-gcc: conversion from 'float' to non-scalar type 'locus::half' requested
// expect-clang: no viable conversion from 'float' to 'locus::half'
// variant: host
#include <locus/locus.hpp>
int main() {
#ifdef LOCUS_FIXED
  locus::half h = locus::half(0.1f);
#else
  locus::half h = 0.1f;
#endif
  return float(h) > 1.f;
}
