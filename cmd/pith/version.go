package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func runVersion(args []string) error {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	fmt.Printf("pith %s%s %s/%s %s\n", version, rev, runtime.GOOS, runtime.GOARCH, runtime.Version())
	return nil
}
