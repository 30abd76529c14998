// spdystream-peer: moby/spdystream's SPDY/3 framer (the one client-go's SPDY executor and
// kubelet use), on stdin and stdout, so the Rust codec can be held against it.
//
//	spdystream-peer decode   reads frames from stdin until EOF, prints one JSON line per frame
//	spdystream-peer encode   writes a fixed sequence of frames to stdout (see frames below)
//
// Built offline in GOPATH mode against Debian's golang-github-docker-spdystream-dev.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

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

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: spdystream-peer decode|encode")
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
