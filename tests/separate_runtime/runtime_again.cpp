// A second copy of the run-time part, for separate_runtime:compiled_twice (twice_main.cpp).
#define LOCUS_RUNTIME_IMPLEMENTATION
#include <locus/runtime.hpp>
