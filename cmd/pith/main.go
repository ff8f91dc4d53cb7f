// Command pith is a plant historian for small computers: it acquires,
// archives, serves and forwards time-series data. Run `pith help`.
package main

import (
	"fmt"
	"os"
)

// command is one subcommand: its name, a one-line summary and its entry.
type command struct {
	name    string
	summary string
	run     func(args []string) error
}

func commands() []command {
	return []command{
		{"serve", "run the historian from a config file", runServe},
		{"demo", "run a complete simulated plant with no set-up", runDemo},
		{"bench", "measure what this machine can handle (pith bench store DIR)", runBench},
		{"freeze", "pause archive writes for N s, then watch the drain", runFreeze},
		{"backup", "write a consistent snapshot of the store (pith backup DEST)", runBackup},
		{"restore", "restore a checked backup into a data directory", runRestore},
		{"verify", "check every checksum of a backup or data directory", runVerify},
		{"key", "make an API key and its config entry", runKey},
		{"user", "manage the people who sign in (add, passwd, role, disable, list)", runUser},
		{"check-config", "validate a config file without starting", runCheckConfig},
		{"cert", "make the OPC UA application certificate, or trust a server's", runCert},
		{"discover", "browse an OPC UA server and print its [[opcua.client]] config", runDiscover},
		{"version", "print the version", runVersion},
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "Pith, a plant historian for small computers.\n\nUsage: pith COMMAND [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(os.Stderr, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "\n`pith COMMAND -h` explains a command's flags.\n")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "help" || name == "-h" || name == "--help" {
		usage()
		return
	}
	for _, c := range commands() {
		if c.name == name {
			if err := c.run(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "pith %s: %v\n", name, err)
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "pith: unknown command %q\n\n", name)
	usage()
	os.Exit(2)
}
