// PrivateAllocFailAfter: allocation failure on demand, for the unit tests of
// code that must fail open. Only the test heap (private_alloc_libc.cc)
// implements it; the shim's heap fails only when memory does.
#ifndef TCPADVISE_PRIVATE_ALLOC_TESTING_H_
#define TCPADVISE_PRIVATE_ALLOC_TESTING_H_

namespace tcpadvise {

// PrivateAllocFailAfter makes PrivateAlloc succeed n more times, then
// return nullptr until called again; a negative n never fails (the default).
void PrivateAllocFailAfter(long n);

}  // namespace tcpadvise

#endif  // TCPADVISE_PRIVATE_ALLOC_TESTING_H_
