// go-libcni drives Go's libcni (Debian's golang-github-appc-cni-dev, libcni 1.1) directly, so the
// ocicni tests can check that a Go runtime and ocicni share one result cache: each tears down or
// checks what the other set up.
//
//	go-libcni [flags] add CONFLIST_FILE CONTAINER_ID NETNS IFNAME [K=V;...]
//	go-libcni [flags] del-cached NETWORK_NAME CONTAINER_ID IFNAME [NETNS]
//	go-libcni [flags] check CONFLIST_FILE CONTAINER_ID NETNS IFNAME
//
// add runs AddNetworkList with the given CNI_ARGS (and -capability-args), which caches the
// attachment. del-cached reads no configuration file: GetNetworkListCachedConfig gives the
// configuration bytes and the CNI_ARGS and capability args ADD used, and DelNetworkList runs with
// them, as Go ocicni tears down a pod whose network file is gone. libcni 1.1 caches no namespace
// path, so the runtime passes the one it knows (none means the namespace is gone). check runs
// CheckNetworkList on the file's configuration with the cached CNI_ARGS and capability args
// overlaid, as Go ocicni's pod status does.
//
// Every outcome is one JSON object on stdout: the result or what was run, or {"error": ...} with
// exit status 1 (2 for a usage error).
//
// Build offline in GOPATH mode against Debian's packages:
//
//	GO111MODULE=off GOPROXY=off GOFLAGS= GOPATH=/nonexistent:/usr/share/gocode go build -o OUT main.go
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

var (
	cacheDir   = flag.String("cache-dir", libcni.CacheDir, "the result cache directory")
	pluginPath = flag.String("plugin-path", "/usr/lib/cni", "plugin directories, colon-separated")
	capArgs    = flag.String("capability-args", "", "add: capability args as a JSON object")
	timeout    = flag.Duration("timeout", time.Minute, "how long the whole operation may take")
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage:\n"+
			"  %[1]s [flags] add CONFLIST_FILE CONTAINER_ID NETNS IFNAME [K=V;...]\n"+
			"  %[1]s [flags] del-cached NETWORK_NAME CONTAINER_ID IFNAME [NETNS]\n"+
			"  %[1]s [flags] check CONFLIST_FILE CONTAINER_ID NETNS IFNAME\nflags:\n",
			filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		usage("no subcommand")
	}
	cni := libcni.NewCNIConfigWithCacheDir(filepath.SplitList(*pluginPath), *cacheDir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var out interface{}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "add":
		if len(rest) != 4 && len(rest) != 5 {
			usage("add wants CONFLIST_FILE CONTAINER_ID NETNS IFNAME [K=V;...]")
		}
		cniArgs := ""
		if len(rest) == 5 {
			cniArgs = rest[4]
		}
		out, err = add(ctx, cni, rest[0], rest[1], rest[2], rest[3], cniArgs)
	case "del-cached":
		if len(rest) != 3 && len(rest) != 4 {
			usage("del-cached wants NETWORK_NAME CONTAINER_ID IFNAME [NETNS]")
		}
		netns := ""
		if len(rest) == 4 {
			netns = rest[3]
		}
		out, err = delCached(ctx, cni, rest[0], rest[1], rest[2], netns)
	case "check":
		if len(rest) != 4 {
			usage("check wants CONFLIST_FILE CONTAINER_ID NETNS IFNAME")
		}
		out, err = check(ctx, cni, rest[0], rest[1], rest[2], rest[3])
	default:
		usage(fmt.Sprintf("unknown subcommand %q", cmd))
	}
	if err != nil {
		fail(err)
	}
	emit(out)
}

func add(ctx context.Context, cni *libcni.CNIConfig, file, id, netns, ifname, cniArgs string) (interface{}, error) {
	list, err := libcni.ConfListFromFile(file)
	if err != nil {
		return nil, err
	}
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: ifname}
	if rt.Args, err = parseArgs(cniArgs); err != nil {
		return nil, err
	}
	if *capArgs != "" {
		if err := json.Unmarshal([]byte(*capArgs), &rt.CapabilityArgs); err != nil {
			return nil, fmt.Errorf("-capability-args: %w", err)
		}
	}
	result, err := cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		return nil, err
	}
	// The result in the list's version, as libcni cached it.
	return map[string]interface{}{"network": list.Name, "result": result}, nil
}

func delCached(ctx context.Context, cni *libcni.CNIConfig, network, id, ifname, netns string) (interface{}, error) {
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: ifname}
	bytes, cachedRt, err := cni.GetNetworkListCachedConfig(&libcni.NetworkConfigList{Name: network}, rt)
	if err != nil {
		return nil, err
	}
	if bytes == nil || cachedRt == nil {
		return nil, fmt.Errorf("no cached configuration for network %q, container %q, interface %q in %s",
			network, id, ifname, *cacheDir)
	}
	list, err := listFromBytes(bytes)
	if err != nil {
		return nil, fmt.Errorf("cached configuration of network %q: %w", network, err)
	}
	if err := cni.DelNetworkList(ctx, list, cachedRt); err != nil {
		return nil, err
	}
	return ran(list, cachedRt), nil
}

func check(ctx context.Context, cni *libcni.CNIConfig, file, id, netns, ifname string) (interface{}, error) {
	list, err := libcni.ConfListFromFile(file)
	if err != nil {
		return nil, err
	}
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: ifname}
	_, cachedRt, err := cni.GetNetworkListCachedConfig(list, rt)
	if err != nil {
		return nil, err
	}
	if cachedRt != nil {
		rt = cachedRt
	}
	if err := cni.CheckNetworkList(ctx, list, rt); err != nil {
		return nil, err
	}
	return ran(list, rt), nil
}

// listFromBytes parses cached configuration bytes as a list, or else as a single plugin's
// configuration (what was cached for a .conf file), as Go ocicni does.
func listFromBytes(bytes []byte) (*libcni.NetworkConfigList, error) {
	list, listErr := libcni.ConfListFromBytes(bytes)
	if listErr == nil {
		return list, nil
	}
	conf, err := libcni.ConfFromBytes(bytes)
	if err != nil {
		return nil, listErr
	}
	return libcni.ConfListFromConf(conf)
}

// ran describes the runtime configuration an operation used.
func ran(list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) map[string]interface{} {
	return map[string]interface{}{
		"network":        list.Name,
		"cniVersion":     list.CNIVersion,
		"plugins":        pluginTypes(list),
		"containerId":    rt.ContainerID,
		"netns":          rt.NetNS,
		"ifName":         rt.IfName,
		"cniArgs":        rt.Args,
		"capabilityArgs": rt.CapabilityArgs,
	}
}

func pluginTypes(list *libcni.NetworkConfigList) []string {
	names := make([]string, 0, len(list.Plugins))
	for _, p := range list.Plugins {
		names = append(names, p.Network.Type)
	}
	return names
}

// parseArgs splits "K=V;K=V" into the pairs libcni passes as CNI_ARGS, in order.
func parseArgs(text string) ([][2]string, error) {
	if text == "" {
		return nil, nil
	}
	var pairs [][2]string
	for _, item := range strings.Split(text, ";") {
		kv := strings.SplitN(item, "=", 2)
		if len(kv) != 2 || kv[0] == "" {
			return nil, fmt.Errorf("CNI_ARGS item %q is not K=V", item)
		}
		pairs = append(pairs, [2]string{kv[0], kv[1]})
	}
	return pairs, nil
}

func emit(v interface{}) {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "go-libcni: encode output:", err)
		os.Exit(1)
	}
}

// fail prints the error as JSON, with the plugin's error code when a plugin returned one.
func fail(err error) {
	out := map[string]interface{}{"error": err.Error()}
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		out["code"] = cniErr.Code
		out["msg"] = cniErr.Msg
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	os.Exit(1)
}

func usage(why string) {
	fmt.Fprintln(os.Stderr, "go-libcni:", why)
	flag.Usage()
	os.Exit(2)
}
