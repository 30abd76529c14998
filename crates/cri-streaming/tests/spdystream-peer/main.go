// spdystream-peer: moby/spdystream's SPDY/3 framer (the one client-go's SPDY executor and
// kubelet use), on stdin and stdout, so the Rust codec can be held against it.
//
//	spdystream-peer decode   reads frames from stdin until EOF, prints one JSON line per frame
//	spdystream-peer encode   writes a fixed sequence of frames to stdout (see frames below)
//	spdystream-peer client SOCKET BYTES
//	                         a spdystream client connection on a unix socket, as client-go's
//	                         SPDY executor runs kubectl exec: error, stdin and stdout streams,
//	                         BYTES bytes on stdin then FIN, stdout and error read to EOF, a ping;
//	                         prints {"stdout_len","stdout_sum","error"} as JSON
//	spdystream-peer upgrade URL BYTES
//	                         the same exec over an HTTP/1.1 connection upgraded to SPDY/3.1 with
//	                         X-Stream-Protocol-Version: v4.channel.k8s.io, as client-go's
//	                         SPDY round tripper upgrades it; also prints the negotiated protocol
//	spdystream-peer upgrade-tty URL INPUT [detach]
//	                         an exec or attach with a terminal as kubectl exec -it or crictl
//	                         attach -it runs it: error, stdin, stdout and resize streams, a size
//	                         of 91x17, INPUT typed on stdin, which stays open (a terminal never
//	                         ends) unless `detach`: then it is closed 1 s later, as crictl does
//	                         at ctrl-p ctrl-q; stdout and error read to EOF, each within 30 s;
//	                         prints {"stdout","error"} as JSON
//
// Built offline in GOPATH mode against Debian's golang-github-docker-spdystream-dev.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/spdystream"
	"github.com/moby/spdystream/spdy"
)

type line struct {
	Type    string              `json:"type"`
	Stream  uint32              `json:"stream,omitempty"`
	Assoc   uint32              `json:"assoc,omitempty"`
	Pri     uint8               `json:"pri,omitempty"`
	Flags   uint8               `json:"flags,omitempty"`
	Headers map[string][]string `json:"headers,omitempty"`
	Data    string              `json:"data,omitempty"`
	Value   uint32              `json:"value,omitempty"`
	Status  uint32              `json:"status,omitempty"`
	Entries [][3]uint32         `json:"entries,omitempty"`
}

func describe(f spdy.Frame) line {
	switch f := f.(type) {
	case *spdy.SynStreamFrame:
		return line{Type: "syn_stream", Stream: uint32(f.StreamId), Assoc: uint32(f.AssociatedToStreamId), Pri: f.Priority, Flags: uint8(f.CFHeader.Flags), Headers: f.Headers}
	case *spdy.SynReplyFrame:
		return line{Type: "syn_reply", Stream: uint32(f.StreamId), Flags: uint8(f.CFHeader.Flags), Headers: f.Headers}
	case *spdy.HeadersFrame:
		return line{Type: "headers", Stream: uint32(f.StreamId), Flags: uint8(f.CFHeader.Flags), Headers: f.Headers}
	case *spdy.RstStreamFrame:
		return line{Type: "rst_stream", Stream: uint32(f.StreamId), Status: uint32(f.Status)}
	case *spdy.SettingsFrame:
		l := line{Type: "settings", Flags: uint8(f.CFHeader.Flags)}
		for _, e := range f.FlagIdValues {
			l.Entries = append(l.Entries, [3]uint32{uint32(e.Flag), uint32(e.Id), e.Value})
		}
		return l
	case *spdy.PingFrame:
		return line{Type: "ping", Value: f.Id}
	case *spdy.GoAwayFrame:
		return line{Type: "goaway", Stream: uint32(f.LastGoodStreamId), Status: uint32(f.Status)}
	case *spdy.WindowUpdateFrame:
		return line{Type: "window_update", Stream: uint32(f.StreamId), Value: f.DeltaWindowSize}
	case *spdy.DataFrame:
		return line{Type: "data", Stream: uint32(f.StreamId), Flags: uint8(f.Flags), Data: string(f.Data)}
	}
	return line{Type: fmt.Sprintf("%T", f)}
}

func frames() []spdy.Frame {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = append(out[kv[i]], kv[i+1])
		}
		return out
	}
	fs := []spdy.Frame{
		&spdy.SettingsFrame{FlagIdValues: []spdy.SettingsFlagIdValue{{Flag: 0, Id: spdy.SettingsInitialWindowSize, Value: 65536}}},
		&spdy.SynStreamFrame{StreamId: 1, Priority: 0, Headers: h("streamtype", "error")},
		&spdy.SynStreamFrame{StreamId: 3, Priority: 0, Headers: h("streamtype", "stdout")},
		&spdy.SynStreamFrame{StreamId: 5, Priority: 0, Headers: h("streamtype", "data", "port", "8080", "requestid", "0")},
		&spdy.SynReplyFrame{StreamId: 2, Headers: http.Header{}},
		&spdy.HeadersFrame{StreamId: 3, Headers: h("x-multi", "a", "x-multi", "b")},
		&spdy.DataFrame{StreamId: 1, Flags: spdy.DataFlagFin, Data: []byte("hello")},
		&spdy.PingFrame{Id: 7},
		&spdy.WindowUpdateFrame{StreamId: 1, DeltaWindowSize: 1024},
		&spdy.RstStreamFrame{StreamId: 3, Status: spdy.Cancel},
		&spdy.GoAwayFrame{LastGoodStreamId: 5, Status: spdy.GoAwayOK},
	}
	// Many header blocks, one long value: the shared context over many flushes.
	for i := 7; i < 200; i += 2 {
		fs = append(fs, &spdy.SynStreamFrame{StreamId: spdy.StreamId(i), Headers: h("streamtype", "stdin", "n", strings.Repeat("v", i))})
	}
	return fs
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}

// bufferedConn reads what the HTTP response reader buffered past the head first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// upgrade plays client-go's SPDY round tripper: GET with the upgrade headers, 101 expected.
func upgrade(rawURL string, n int) {
	exec(dialUpgraded(rawURL), n)
}

// dialUpgraded plays client-go's SPDY round tripper: POST with the upgrade headers, 101
// expected; the connection, reading first what the response reader buffered.
func dialUpgraded(rawURL string) net.Conn {
	u, err := url.Parse(rawURL)
	if err != nil {
		fail("url", err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		fail("dial", err)
	}
	req, err := http.NewRequest("POST", rawURL, nil)
	if err != nil {
		fail("request", err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	req.Header.Add("X-Stream-Protocol-Version", "v4.channel.k8s.io")
	req.Header.Add("X-Stream-Protocol-Version", "v3.channel.k8s.io")
	if err := req.Write(conn); err != nil {
		fail("write request", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		fail("read response", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		fail("upgrade", fmt.Errorf("status %d: %s", resp.StatusCode, body))
	}
	fmt.Fprintf(os.Stderr, "protocol %s\n", resp.Header.Get("X-Stream-Protocol-Version"))
	return bufferedConn{Conn: conn, r: br}
}

// upgradeTty plays kubectl exec -it: the streams client-go's v4 executor opens with a terminal
// (no stderr, a resize stream), stdin never closed.
func upgradeTty(rawURL string, input string, detach bool) {
	spdyConn, open := session(dialUpgraded(rawURL))
	errStream := open("error")
	stdin := open("stdin")
	stdout := open("stdout")
	resize := open("resize")
	errStream.Close()
	if _, err := resize.Write([]byte(`{"Width":91,"Height":17}` + "\n")); err != nil {
		fail("write resize", err)
	}
	if _, err := stdin.Write([]byte(input)); err != nil {
		fail("write stdin", err)
	}
	if detach {
		time.Sleep(time.Second)
		stdin.Close()
	}
	readAll := func(what string, r io.Reader) string {
		got := make(chan []byte, 1)
		go func() {
			b, err := io.ReadAll(r)
			if err != nil {
				fail("read "+what, err)
			}
			got <- b
		}()
		select {
		case b := <-got:
			return string(b)
		case <-time.After(30 * time.Second):
			fail(what, fmt.Errorf("no EOF within 30 s"))
		}
		return ""
	}
	out := readAll("stdout", stdout)
	status := readAll("error stream", errStream)
	json.NewEncoder(os.Stdout).Encode(map[string]string{"stdout": out, "error": status})
	spdyConn.Close()
}

// client plays kubectl exec's SPDY side against the server on socket.
func client(socket string, n int) {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		fail("dial", err)
	}
	exec(conn, n)
}

// session serves a spdystream client connection on conn; with it, a function that opens a
// stream of a type and waits (5 s at most) for the server's reply.
func session(conn net.Conn) (*spdystream.Connection, func(string) *spdystream.Stream) {
	spdyConn, err := spdystream.NewConnection(conn, false)
	if err != nil {
		fail("spdy connection", err)
	}
	go spdyConn.Serve(spdystream.NoOpStreamHandler)
	open := func(t string) *spdystream.Stream {
		s, err := spdyConn.CreateStream(http.Header{"Streamtype": {t}}, nil, false)
		if err != nil {
			fail("create "+t, err)
		}
		if err := s.WaitTimeout(5 * time.Second); err != nil {
			fail("reply to "+t, err)
		}
		return s
	}
	return spdyConn, open
}

func exec(conn net.Conn, n int) {
	spdyConn, open := session(conn)
	errStream := open("error")
	stdin := open("stdin")
	stdout := open("stdout")
	if _, err := spdyConn.Ping(); err != nil {
		fail("ping", err)
	}
	// As client-go: the error stream is write-closed at once, stdin after its last byte.
	errStream.Close()
	go func() {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i % 251)
		}
		if _, err := stdin.Write(payload); err != nil {
			fail("write stdin", err)
		}
		stdin.Close()
	}()
	out, err := io.ReadAll(stdout)
	if err != nil {
		fail("read stdout", err)
	}
	status, err := io.ReadAll(errStream)
	if err != nil {
		fail("read error stream", err)
	}
	sum := 0
	for _, b := range out {
		sum += int(b)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]interface{}{
		"stdout_len": len(out),
		"stdout_sum": sum,
		"error":      string(status),
	})
	spdyConn.Close()
}

func main() {
	if (len(os.Args) == 4 || len(os.Args) == 5 && os.Args[4] == "detach") && os.Args[1] == "upgrade-tty" {
		upgradeTty(os.Args[2], os.Args[3], len(os.Args) == 5)
		return
	}
	if len(os.Args) == 4 && (os.Args[1] == "client" || os.Args[1] == "upgrade") {
		n, err := strconv.Atoi(os.Args[3])
		if err != nil {
			fail("bytes", err)
		}
		if os.Args[1] == "client" {
			client(os.Args[2], n)
		} else {
			upgrade(os.Args[2], n)
		}
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: spdystream-peer decode|encode|client SOCKET BYTES|upgrade URL BYTES")
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	framer, err := spdy.NewFramer(out, bufio.NewReader(os.Stdin))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switch os.Args[1] {
	case "encode":
		for _, f := range frames() {
			if err := framer.WriteFrame(f); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	case "decode":
		enc := json.NewEncoder(out)
		for {
			f, err := framer.ReadFrame()
			if err == io.EOF {
				return
			}
			if err != nil {
				out.Flush()
				fmt.Fprintf(os.Stderr, "spdystream: %v\n", err)
				os.Exit(1)
			}
			if err := enc.Encode(describe(f)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	}
}
