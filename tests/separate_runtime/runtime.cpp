// The program's one copy of locus's run-time part (LOCUS_SEPARATE_RUNTIME, config.hpp), as README
// writes it by hand: the configuration-mismatch test links it; the separate-runtime program gets the
// same two lines from locus_separate_runtime (cmake/locusBackend.cmake).
#define LOCUS_RUNTIME_IMPLEMENTATION
#include <locus/runtime.hpp>
