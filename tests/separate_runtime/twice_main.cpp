// A separate-runtime program that compiles the run-time part twice (runtime.cpp and
// runtime_again.cpp, as a library's runtime file and the executable's would): it must not link, and
// among the duplicate definitions is one that names the cause (runtime.hpp). Built by the test
// separate_runtime:compiled_twice only (expect_failure.cmake).
// expect: multiple definition of `locus::detail::the_separate_runtime_is_compiled_once_per_program()'
#define LOCUS_SEPARATE_RUNTIME 1
#include <locus/locus.hpp>

int main() { return locus::gpu_count() == 0 ? 0 : 1; }
