package bench

import (
	"fmt"
	"os"
	"os/exec"
)

// Profile is how the `pith serve` child of a benchmark is confined.
type Profile string

// The profiles: ProfileDefault leaves the server alone; ProfileSmall is a
// small board (a Raspberry Pi 3 class: one slow core, 1 GB): the server
// runs with GOMAXPROCS=1, on one CPU (taskset -c 0, when taskset is
// installed) and with GOMEMLIMIT=1GiB, the Go runtime's soft limit (a
// cgroup would need privileges the benchmark does not assume).
const (
	ProfileDefault Profile = ""
	ProfileSmall   Profile = "small"
)

// ParseProfile checks a --profile flag value.
func ParseProfile(s string) (Profile, error) {
	switch Profile(s) {
	case ProfileDefault, "default":
		return ProfileDefault, nil
	case ProfileSmall:
		return ProfileSmall, nil
	}
	return "", fmt.Errorf("unknown profile %q (want default or small)", s)
}

// String names the profile as the reports print it.
func (p Profile) String() string {
	if p == ProfileSmall {
		return "small (GOMAXPROCS=1, " + p.cpuNote() + ", GOMEMLIMIT=1GiB)"
	}
	return "default (all CPUs, no memory limit)"
}

func (p Profile) cpuNote() string {
	if _, err := exec.LookPath("taskset"); err == nil {
		return "taskset -c 0"
	}
	return "no taskset: all CPUs"
}

// command is exe with args, confined as the profile says.
func (p Profile) command(exe string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if p == ProfileSmall {
		if ts, err := exec.LookPath("taskset"); err == nil {
			cmd = exec.Command(ts, append([]string{"-c", "0", exe}, args...)...)
		}
	}
	if cmd == nil {
		cmd = exec.Command(exe, args...)
	}
	if p == ProfileSmall {
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GOMEMLIMIT=1GiB")
	}
	return cmd
}
