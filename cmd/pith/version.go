package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is stamped at build time: -ldflags "-X main.version=v1.2.3"
// (packaging/build.sh does). When it is not, versionString falls back on
// the module's build info.
var version string

// versionString is the stamped version, else the main module's version
// from the build info (set by `go build` in a git checkout or by
// `go install ...@v1.2.3`), else "dev" (as under `go run`).
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func runVersion(args []string) error {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	fmt.Printf("pith %s%s %s/%s %s\n", versionString(), rev, runtime.GOOS, runtime.GOARCH, runtime.Version())
	return nil
}
