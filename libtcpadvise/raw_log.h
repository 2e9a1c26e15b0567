// RawLog: warnings on stderr that neither allocate nor lock, safe from any
// wrapped call, a fork child or a signal handler.
#ifndef TCPADVISE_RAW_LOG_H_
#define TCPADVISE_RAW_LOG_H_

namespace tcpadvise {

// RawWarning prints "tcpadvise: warning: <message>\n" on stderr with one
// write(2). The message is formatted with vsnprintf into a stack buffer.
void RawWarning(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace tcpadvise

#endif  // TCPADVISE_RAW_LOG_H_
