package packaging

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/config"
)

// TestDeb checks a .deb built by build.sh, named by $PITH_TEST_DEB:
// control fields, contents and modes, the conffile, the maintainer
// scripts, a static binary for the package's architecture, the unit's
// settings and the packaged config. It runs nothing as root and installs
// nothing (.ci/run installs the package).
//
//	packaging/build.sh amd64 && PITH_TEST_DEB=$PWD/dist/pith_..._amd64.deb go test ./packaging/
func TestDeb(t *testing.T) {
	deb := os.Getenv("PITH_TEST_DEB")
	if deb == "" {
		t.Skip("PITH_TEST_DEB not set (a .deb from packaging/build.sh): package checks skipped")
	}
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed: package checks skipped")
	}
	dpkgDeb := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("dpkg-deb", args...).Output()
		if err != nil {
			t.Fatalf("dpkg-deb %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}

	// Control fields.
	ctl := map[string]string{}
	for _, f := range []string{"Package", "Version", "Architecture", "Maintainer", "Description"} {
		ctl[f] = strings.TrimSpace(dpkgDeb("-f", deb, f))
	}
	if ctl["Package"] != "pith" {
		t.Errorf("Package: %q, want pith", ctl["Package"])
	}
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "armhf": elf.EM_ARM}
	machine, ok := wantMachine[ctl["Architecture"]]
	if !ok {
		t.Errorf("Architecture: %q, want amd64, arm64 or armhf", ctl["Architecture"])
	}
	for _, f := range []string{"Version", "Maintainer", "Description"} {
		if ctl[f] == "" {
			t.Errorf("control field %s empty", f)
		}
	}

	// Contents and modes (dpkg-deb -c lists like tar tv).
	modes := map[string]string{}
	for _, line := range strings.Split(dpkgDeb("-c", deb), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 6 {
			modes[strings.TrimPrefix(fields[len(fields)-1], ".")] = fields[0] + " " + fields[1]
		}
	}
	for path, want := range map[string]string{
		"/usr/bin/pith":                    "-rwxr-xr-x root/root",
		"/lib/systemd/system/pith.service": "-rw-r--r-- root/root",
		"/etc/pith/pith.toml":              "-rw-r----- root/root",
		"/usr/share/doc/pith/copyright":    "-rw-r--r-- root/root",
	} {
		if got := modes[path]; got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	for path := range modes {
		if strings.HasPrefix(path, "/var/lib/pith") {
			t.Errorf("package ships %s: the data directory must not belong to the package", path)
		}
	}

	// Control archive: conffiles and maintainer scripts.
	ctlDir := t.TempDir()
	dpkgDeb("-e", deb, ctlDir)
	conff, err := os.ReadFile(filepath.Join(ctlDir, "conffiles"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(conff)); got != "/etc/pith/pith.toml" {
		t.Errorf("conffiles: %q, want /etc/pith/pith.toml", got)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		p := filepath.Join(ctlDir, s)
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("maintainer script %s: %v", s, err)
			continue
		}
		if fi.Mode()&0o111 != 0o111 {
			t.Errorf("%s mode %v: not executable", s, fi.Mode())
		}
		if out, err := exec.Command("sh", "-n", p).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v: %s", s, err, out)
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "rm -r") {
			t.Errorf("%s deletes recursively: removing the package must keep the data", s)
		}
	}
	postinst, _ := os.ReadFile(filepath.Join(ctlDir, "postinst"))
	if !strings.Contains(string(postinst), "getent passwd pith") {
		t.Error("postinst does not check for an existing pith user before creating it")
	}

	// Files.
	root := t.TempDir()
	dpkgDeb("-x", deb, root)
	checkStaticELF(t, filepath.Join(root, "usr/bin/pith"), machine)
	checkUnit(t, filepath.Join(root, "lib/systemd/system/pith.service"))
	cfg, err := config.Load(filepath.Join(root, "etc/pith/pith.toml"))
	if err != nil {
		t.Fatalf("packaged config: %v", err)
	}
	if cfg.Store.Dir != "/var/lib/pith" {
		t.Errorf("packaged store.dir %q, want /var/lib/pith", cfg.Store.Dir)
	}
	if machine == map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH] {
		out, err := exec.Command(filepath.Join(root, "usr/bin/pith"), "version").Output()
		if err != nil {
			t.Fatalf("pith version: %v", err)
		}
		if !strings.HasPrefix(string(out), "pith v") {
			t.Errorf("pith version: %q, want a stamped version (pith v...)", out)
		}
	}
}

// checkStaticELF checks that path is an executable for machine with no
// dynamic loader and no shared libraries: it runs on any distribution.
func checkStaticELF(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != machine {
		t.Errorf("binary for %v, want %v", f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("binary has a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v: not static", libs)
	}
}

// checkUnit checks the settings the service relies on.
func checkUnit(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			got[k] = v
		}
	}
	want := map[string]string{
		"Type":                    "notify",
		"ExecStart":               "/usr/bin/pith serve --config /etc/pith/pith.toml",
		"User":                    "pith",
		"StateDirectory":          "pith",
		"SupplementaryGroups":     "dialout",
		"Restart":                 "on-failure",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"NoNewPrivileges":         "yes",
		"PrivateTmp":              "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectControlGroups":    "yes",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"CapabilityBoundingSet":   "",
		"WantedBy":                "multi-user.target",
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("unit %s=%q (set: %v), want %q", k, g, ok, v)
		}
	}
	if got["WatchdogSec"] == "" {
		t.Error("unit has no WatchdogSec")
	}
}
