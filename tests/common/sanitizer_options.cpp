// AddressSanitizer aborts on an impossible allocation unless told to return null; the tests check
// that such an allocation becomes locus::allocation_error, so they ask for the documented behaviour.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
