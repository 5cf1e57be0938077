// The program's one copy of locus's run-time part (LOCUS_SEPARATE_RUNTIME, config.hpp).
#define LOCUS_RUNTIME_IMPLEMENTATION
#include <locus/runtime.hpp>
