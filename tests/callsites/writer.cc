// A C++ client: requests written by a class's member functions, so that
// the report has mangled names to demangle.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace proto {

class Writer {
 public:
  explicit Writer(int fd) : fd_(fd) {}
  __attribute__((noinline)) bool Header(int n) {
    char header[8];
    std::memset(header, 'h', sizeof(header));
    header[0] = static_cast<char>(n);
    return write(fd_, header, sizeof(header)) == static_cast<ssize_t>(sizeof(header));
  }
  __attribute__((noinline)) bool Body() {
    char body[32];
    std::memset(body, 'b', sizeof(body));
    return send(fd_, body, sizeof(body), 0) == static_cast<ssize_t>(sizeof(body));
  }

 private:
  int fd_;
};

}  // namespace proto

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<unsigned short>(std::atoi(argv[1])));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return 1;
  proto::Writer writer(fd);
  for (int i = 0; i < std::atoi(argv[2]); ++i) {
    char reply;
    if (!writer.Header(i) || !writer.Body() || read(fd, &reply, 1) != 1) return 1;
  }
  close(fd);
  return 0;
}
