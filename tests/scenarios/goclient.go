// goclient: a Go TCP client, which the shim cannot see (Go makes its system
// calls without libc): the shim-blind scenario. It sends one message to
// 127.0.0.1:PORT and reads until the server closes.
//
//	goclient PORT
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: goclient PORT")
		os.Exit(2)
	}
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+os.Args[1], 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goclient:", err)
		os.Exit(1)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello from go\n")); err != nil {
		fmt.Fprintln(os.Stderr, "goclient:", err)
		os.Exit(1)
	}
	conn.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, conn)
}
