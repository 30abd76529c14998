// go-cri-client is a deliberately tiny CRI (runtime.v1) client used by the
// crio-lite integration tests. It is built against the grpc-go shipped by
// Debian 12 (1.33.3), i.e. the grpc-go generation used by crictl < 1.31, and
// dials the runtime socket the same way those crictl versions did: the plain
// socket path is the dial target, so grpc-go sends that path as the HTTP/2
// :authority pseudo-header.
//
// There is no CRI Go API package in Debian, so the few protobuf messages needed
// are encoded and decoded by hand with protowire, and grpc-go is given a codec
// that passes raw bytes through unchanged.
//
// Build (GOPATH mode, offline, Debian packages only):
//
//	GO111MODULE=off GOPROXY=off GOFLAGS= GOPATH=/tmp/gopath:/usr/share/gocode \
//	    go build -o go-cri-client main.go
//
// Usage:
//
//	go-cri-client -socket PATH [-authority X] [-timeout 10s] CMD [args]
//
//	version                    Version
//	runp NAME NAMESPACE UID    RunPodSandbox
//	pods                       ListPodSandbox
//	stopp ID                   StopPodSandbox
//	rmp ID                     RemovePodSandbox
//	ps                         ListContainers
//
// Each command prints one JSON line on stdout. On failure the gRPC status code
// name and message are printed on stderr and the exit status is 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

const service = "/runtime.v1.RuntimeService/"

// Same limit crictl/kubelet configure for CRI calls.
const maxMsgSize = 16 * 1024 * 1024

// rawCodec hands already-encoded protobuf bytes to grpc-go and returns the
// received message bytes untouched. It is installed per call with
// grpc.ForceCodec, which leaves the call's content-subtype empty, so the
// request content-type is plain "application/grpc" exactly as with grpc-go's
// built-in proto codec.
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) {
	switch m := v.(type) {
	case []byte:
		return m, nil
	case *[]byte:
		return *m, nil
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	m, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	// grpc-go may reuse the receive buffer, so keep a private copy.
	*m = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// ---- protobuf encoding helpers (proto3: default values are omitted) ----

func putString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func putUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// putMessage always emits the field, even when the embedded message is empty,
// so that a set-but-empty sub-message stays "present" for the server.
func putMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

// ---- protobuf decoding helpers ----

type field struct {
	num    protowire.Number
	typ    protowire.Type
	varint uint64 // VarintType
	bytes  []byte // BytesType
}

func parseFields(b []byte) ([]field, error) {
	var out []field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.varint, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		out = append(out, f)
	}
	return out, nil
}

// stringField returns the last occurrence of a string field (proto "last one
// wins" semantics for scalars).
func stringField(fs []field, num protowire.Number) string {
	s := ""
	for _, f := range fs {
		if f.num == num && f.typ == protowire.BytesType {
			s = string(f.bytes)
		}
	}
	return s
}

func varintField(fs []field, num protowire.Number) uint64 {
	var v uint64
	for _, f := range fs {
		if f.num == num && f.typ == protowire.VarintType {
			v = f.varint
		}
	}
	return v
}

// messageFields returns the raw bytes of every occurrence of an embedded
// message (or repeated message) field.
func messageFields(fs []field, num protowire.Number) [][]byte {
	var out [][]byte
	for _, f := range fs {
		if f.num == num && f.typ == protowire.BytesType {
			out = append(out, f.bytes)
		}
	}
	return out
}

// ---- CRI messages (field numbers from k8s cri-api runtime/v1 api.proto) ----

// VersionRequest { string version = 1; }
func encodeVersionRequest(version string) []byte {
	return putString(nil, 1, version)
}

type versionOut struct {
	RuntimeName       string `json:"runtime_name"`
	RuntimeVersion    string `json:"runtime_version"`
	RuntimeAPIVersion string `json:"runtime_api_version"`
}

// VersionResponse { version = 1; runtime_name = 2; runtime_version = 3;
// runtime_api_version = 4; } (all strings)
func decodeVersionResponse(b []byte) (versionOut, error) {
	fs, err := parseFields(b)
	if err != nil {
		return versionOut{}, err
	}
	return versionOut{
		RuntimeName:       stringField(fs, 2),
		RuntimeVersion:    stringField(fs, 3),
		RuntimeAPIVersion: stringField(fs, 4),
	}, nil
}

// PodSandboxMetadata { string name = 1; string uid = 2; string namespace = 3;
// uint32 attempt = 4; }
func encodePodSandboxMetadata(name, uid, namespace string, attempt uint32) []byte {
	var b []byte
	b = putString(b, 1, name)
	b = putString(b, 2, uid)
	b = putString(b, 3, namespace)
	b = putUint(b, 4, uint64(attempt))
	return b
}

// RunPodSandboxRequest { PodSandboxConfig config = 1; string runtime_handler = 2; }
// PodSandboxConfig { PodSandboxMetadata metadata = 1; string hostname = 2;
// string log_directory = 3; ... }
func encodeRunPodSandboxRequest(name, namespace, uid string) []byte {
	var cfg []byte
	cfg = putMessage(cfg, 1, encodePodSandboxMetadata(name, uid, namespace, 0))
	cfg = putString(cfg, 2, name)
	cfg = putString(cfg, 3, "") // log_directory: empty, omitted on the wire
	return putMessage(nil, 1, cfg)
}

type runpOut struct {
	PodSandboxID string `json:"pod_sandbox_id"`
}

// RunPodSandboxResponse { string pod_sandbox_id = 1; }
func decodeRunPodSandboxResponse(b []byte) (runpOut, error) {
	fs, err := parseFields(b)
	if err != nil {
		return runpOut{}, err
	}
	return runpOut{PodSandboxID: stringField(fs, 1)}, nil
}

// StopPodSandboxRequest / RemovePodSandboxRequest { string pod_sandbox_id = 1; }
func encodePodSandboxIDRequest(id string) []byte {
	return putString(nil, 1, id)
}

type podItem struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	State uint64 `json:"state"`
}

type podsOut struct {
	Items []podItem `json:"items"`
}

// ListPodSandboxResponse { repeated PodSandbox items = 1; }
// PodSandbox { string id = 1; PodSandboxMetadata metadata = 2;
// PodSandboxState state = 3; ... }
func decodeListPodSandboxResponse(b []byte) (podsOut, error) {
	out := podsOut{Items: []podItem{}}
	fs, err := parseFields(b)
	if err != nil {
		return out, err
	}
	for _, raw := range messageFields(fs, 1) {
		pfs, err := parseFields(raw)
		if err != nil {
			return out, err
		}
		item := podItem{ID: stringField(pfs, 1), State: varintField(pfs, 3)}
		for _, md := range messageFields(pfs, 2) {
			mfs, err := parseFields(md)
			if err != nil {
				return out, err
			}
			if n := stringField(mfs, 1); n != "" {
				item.Name = n
			}
		}
		out.Items = append(out.Items, item)
	}
	return out, nil
}

type psOut struct {
	Containers int `json:"containers"`
}

// ListContainersResponse { repeated Container containers = 1; }
func decodeListContainersResponse(b []byte) (psOut, error) {
	fs, err := parseFields(b)
	if err != nil {
		return psOut{}, err
	}
	return psOut{Containers: len(messageFields(fs, 1))}, nil
}

// ---- plumbing ----

func dial(ctx context.Context, socket, authority string) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{
		grpc.WithInsecure(),
		grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMsgSize),
			grpc.MaxCallSendMsgSize(maxMsgSize),
		),
	}
	if authority != "" {
		opts = append(opts, grpc.WithAuthority(authority))
	}
	// The bare path (no "unix://" scheme) falls back to grpc-go's passthrough
	// resolver, whose endpoint - the path itself - becomes the :authority.
	return grpc.DialContext(ctx, socket, opts...)
}

func call(ctx context.Context, conn *grpc.ClientConn, method string, req []byte) ([]byte, error) {
	var resp []byte
	err := conn.Invoke(ctx, service+method, &req, &resp, grpc.ForceCodec(rawCodec{}))
	return resp, err
}

func fail(err error) {
	code, msg := codes.Unknown, err.Error()
	if s, ok := status.FromError(err); ok {
		code, msg = s.Code(), s.Message()
	} else if errors.Is(err, context.DeadlineExceeded) {
		code = codes.DeadlineExceeded
	} else if errors.Is(err, context.Canceled) {
		code = codes.Canceled
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", code.String(), msg)
	os.Exit(1)
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: %s -socket PATH [-authority X] [-timeout 10s] CMD [args]\n", os.Args[0])
	fmt.Fprintln(os.Stderr, "commands: version | runp NAME NAMESPACE UID | pods | stopp ID | rmp ID | ps")
	flag.PrintDefaults()
}

func main() {
	socket := flag.String("socket", "", "path of the CRI unix socket (dial target, sent as :authority)")
	authority := flag.String("authority", "", "override the HTTP/2 :authority (grpc.WithAuthority)")
	timeout := flag.Duration("timeout", 10*time.Second, "timeout for connecting and for the call")
	flag.Usage = usage
	flag.Parse()
	args := flag.Args()
	if *socket == "" || len(args) == 0 {
		usage()
		os.Exit(2)
	}
	cmd, args := args[0], args[1:]

	wantArgs := map[string]int{"version": 0, "runp": 3, "pods": 0, "stopp": 1, "rmp": 1, "ps": 0}
	n, known := wantArgs[cmd]
	if !known {
		fmt.Fprintf(os.Stderr, "unknown command %q\n", cmd)
		usage()
		os.Exit(2)
	}
	if len(args) != n {
		fmt.Fprintf(os.Stderr, "%s takes %d argument(s), got %d\n", cmd, n, len(args))
		os.Exit(2)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), *timeout)
	conn, err := dial(dctx, *socket, *authority)
	dcancel()
	if err != nil {
		fail(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var out interface{}
	switch cmd {
	case "version":
		resp, err := call(ctx, conn, "Version", encodeVersionRequest("v1"))
		if err != nil {
			fail(err)
		}
		out, err = decodeVersionResponse(resp)
		if err != nil {
			fail(err)
		}
	case "runp":
		resp, err := call(ctx, conn, "RunPodSandbox", encodeRunPodSandboxRequest(args[0], args[1], args[2]))
		if err != nil {
			fail(err)
		}
		out, err = decodeRunPodSandboxResponse(resp)
		if err != nil {
			fail(err)
		}
	case "pods":
		resp, err := call(ctx, conn, "ListPodSandbox", nil)
		if err != nil {
			fail(err)
		}
		out, err = decodeListPodSandboxResponse(resp)
		if err != nil {
			fail(err)
		}
	case "stopp", "rmp":
		method := "StopPodSandbox"
		if cmd == "rmp" {
			method = "RemovePodSandbox"
		}
		if _, err := call(ctx, conn, method, encodePodSandboxIDRequest(args[0])); err != nil {
			fail(err)
		}
		out = struct{}{}
	case "ps":
		resp, err := call(ctx, conn, "ListContainers", nil)
		if err != nil {
			fail(err)
		}
		out, err = decodeListContainersResponse(resp)
		if err != nil {
			fail(err)
		}
	}

	line, err := json.Marshal(out)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(line))
}
