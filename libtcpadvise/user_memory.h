// UserMemory: reading the application's buffers without trusting them. A
// bad pointer handed to write() gets EFAULT from the kernel; the shim, which
// copies held bytes itself, must not crash instead. A range is copied only
// once the kernel confirmed it readable (process_vm_readv on the process
// itself, which fails with EFAULT rather than faulting); confirmed pages are
// remembered per thread, so a program that writes from the same buffers
// pays for that once, until it unmaps or reprotects memory (munmap, mremap
// and mprotect are wrapped and forget every confirmation).
#ifndef TCPADVISE_USER_MEMORY_H_
#define TCPADVISE_USER_MEMORY_H_

#include <stddef.h>

namespace tcpadvise {

// CopyFromApp copies n bytes at src to dst; false, with nothing copied that
// can be relied on, when some of src is not readable. Keeps errno.
bool CopyFromApp(void* dst, const void* src, size_t n);

// ForgetReadableMemory drops every confirmation: the application changed
// its mappings.
void ForgetReadableMemory();

}  // namespace tcpadvise

#endif  // TCPADVISE_USER_MEMORY_H_
