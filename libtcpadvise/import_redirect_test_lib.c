// import_redirect_test_lib: a library whose calls of getppid, one through
// its PLT and one by address (its GOT), import_redirect_test redirects.
// Linked with -z now, both slots are read-only after relocation.
#include <unistd.h>

int lib_getppid(void) { return getppid(); }

void* lib_getppid_address(void) { return (void*)&getppid; }
