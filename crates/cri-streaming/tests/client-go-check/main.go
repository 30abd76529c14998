// client-go-check: kubectl's own streaming clients (client-go's remotecommand and portforward,
// as vendored by cri-tools) against the URLs `cargo run --example echo_server` prints. A check
// by hand, not part of `cargo test`: client-go is not packaged in Debian, so this builds inside
// a cri-tools source tree with its vendor directory (see README.md beside it).
//
//	client-go-check exec spdy|websocket URL     stdin "hello" -> stdout, stderr, exit code
//	client-go-check tty spdy|websocket URL      two terminal sizes, then stdin's end
//	client-go-check portforward URL PORT        two connections through port forward to PORT
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"
)

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}

func executor(transport, raw string) remotecommand.Executor {
	u, err := url.Parse(raw)
	if err != nil {
		fail("url", err)
	}
	var e remotecommand.Executor
	switch transport {
	case "spdy":
		e, err = remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	case "websocket":
		e, err = remotecommand.NewWebSocketExecutor(&rest.Config{}, "GET", raw)
	default:
		err = fmt.Errorf("unknown transport %q", transport)
	}
	if err != nil {
		fail("executor", err)
	}
	return e
}

func result(err error) string {
	var code exec.CodeExitError
	switch {
	case err == nil:
		return "exit=0"
	case errors.As(err, &code):
		return fmt.Sprintf("exit=%d", code.Code)
	default:
		return fmt.Sprintf("error=%v", err)
	}
}

type sizes struct {
	mu   sync.Mutex
	next []remotecommand.TerminalSize
}

func (s *sizes) Next() *remotecommand.TerminalSize {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.next) == 0 {
		return nil
	}
	size := s.next[0]
	s.next = s.next[1:]
	return &size
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch {
	case len(os.Args) == 4 && os.Args[1] == "exec":
		var stdout, stderr bytes.Buffer
		err := executor(os.Args[2], os.Args[3]).StreamWithContext(ctx, remotecommand.StreamOptions{
			Stdin:  strings.NewReader("hello from client-go"),
			Stdout: &stdout,
			Stderr: &stderr,
		})
		fmt.Printf("stdout=%q stderr=%q %s\n", stdout.String(), stderr.String(), result(err))
	case len(os.Args) == 4 && os.Args[1] == "tty":
		var stdout bytes.Buffer
		stdin, writer := io.Pipe()
		go func() {
			time.Sleep(500 * time.Millisecond)
			writer.Close()
		}()
		err := executor(os.Args[2], os.Args[3]).StreamWithContext(ctx, remotecommand.StreamOptions{
			Stdin:             stdin,
			Stdout:            &stdout,
			Tty:               true,
			TerminalSizeQueue: &sizes{next: []remotecommand.TerminalSize{{Width: 80, Height: 24}, {Width: 132, Height: 43}}},
		})
		fmt.Printf("stdout=%q %s\n", stdout.String(), result(err))
	case len(os.Args) == 4 && os.Args[1] == "portforward":
		u, err := url.Parse(os.Args[2])
		if err != nil {
			fail("url", err)
		}
		tr, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
		if err != nil {
			fail("round tripper", err)
		}
		dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u)
		stop, ready := make(chan struct{}), make(chan struct{})
		pf, err := portforward.New(dialer, []string{"0:" + os.Args[3]}, stop, ready, io.Discard, os.Stderr)
		if err != nil {
			fail("port forward", err)
		}
		done := make(chan error, 1)
		go func() { done <- pf.ForwardPorts() }()
		select {
		case <-ready:
		case err := <-done:
			fail("forward ports", err)
		}
		ports, err := pf.GetPorts()
		if err != nil {
			fail("ports", err)
		}
		for i := 0; i < 2; i++ {
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
			if err != nil {
				fail("dial local port", err)
			}
			msg := fmt.Sprintf("ping %d through client-go", i)
			if _, err := conn.Write([]byte(msg)); err != nil {
				fail("write", err)
			}
			got := make([]byte, len(msg))
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(conn, got); err != nil {
				fail("read", err)
			}
			conn.Close()
			fmt.Printf("echoed=%q\n", got)
		}
		close(stop)
		<-done
	default:
		fmt.Fprintln(os.Stderr, "usage: client-go-check exec|tty spdy|websocket URL | portforward URL PORT")
		os.Exit(2)
	}
}
