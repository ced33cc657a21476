// A Go TLS client for the capture tests (Go's own crypto/tls, no C library).
//
//	go_tls_client http URL TOKEN_FILE
//	                         GET URL with net/http, with "Authorization: Bearer"
//	                         and the token read from TOKEN_FILE (so it is not
//	                         in argv); the body goes to stdout.
//	go_tls_client h2 URL TOKEN_FILE
//	                         the same over HTTP/2 (Go's own HPACK encoder).
//	go_tls_client raw ADDR PATH
//	                         GET PATH from ADDR over tls.Client; each Read
//	                         into a buffer on a fresh goroutine's stack, which
//	                         Go moves during the call. The response goes to
//	                         stdout; how many reads saw their stack move, to
//	                         stderr.
//
// Certificates are not verified: the tests' servers are self-signed.
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"unsafe"
)

func httpGet(url, tokenFile string, h2 bool) error {
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		ForceAttemptHTTP2: h2}}
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(os.Stdout, resp.Body)
	return err
}

type chunk struct {
	data  []byte
	moved bool
	err   error
}

// readDeep calls c.Read under `depth` frames of 128 bytes: at some depths
// the Read starts near the end of its goroutine's stack, and the Read's own
// calls then grow it, which copies the stack while the Read is in progress.
//
//go:noinline
func readDeep(c *tls.Conn, b []byte, depth int) (int, error) {
	var pad [128]byte
	pad[depth%128] = byte(depth)
	if depth > 0 {
		n, err := readDeep(c, b, depth-1)
		return n + int(pad[depth%128]&0), err
	}
	return c.Read(b)
}

// readOnFreshStack reads once into a buffer on the stack of a new goroutine.
func readOnFreshStack(c *tls.Conn, depth int, out chan<- chunk) {
	var buf [1024]byte
	before := uintptr(unsafe.Pointer(&buf[0]))
	m, err := readDeep(c, buf[:], depth)
	after := uintptr(unsafe.Pointer(&buf[0]))
	out <- chunk{append([]byte(nil), buf[:m]...), before != after, err}
}

func rawGet(addr, path string) error {
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"})
	defer c.Close()
	if _, err := c.Write([]byte("GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n")); err != nil {
		return err
	}
	moves := 0
	out := make(chan chunk)
	for depth := 0; ; depth = (depth + 1) % 64 {
		go readOnFreshStack(c, depth, out)
		r := <-out
		os.Stdout.Write(r.data)
		if r.moved {
			moves++
		}
		if r.err == io.EOF {
			fmt.Fprintf(os.Stderr, "stack moved during %d reads\n", moves)
			return nil
		}
		if r.err != nil {
			return r.err
		}
	}
}

func main() {
	var err error
	switch {
	case len(os.Args) == 4 && (os.Args[1] == "http" || os.Args[1] == "h2"):
		err = httpGet(os.Args[2], os.Args[3], os.Args[1] == "h2")
	case len(os.Args) == 4 && os.Args[1] == "raw":
		err = rawGet(os.Args[2], os.Args[3])
	default:
		fmt.Fprintln(os.Stderr, "usage: go_tls_client http|h2 URL TOKEN_FILE | raw ADDR PATH")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_tls_client:", err)
		os.Exit(1)
	}
}
