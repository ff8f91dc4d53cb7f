package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/pith-historian/pith/internal/acq/opcua"
	"github.com/pith-historian/pith/internal/config"
)

// runDiscover browses an OPC UA server and prints [[opcua.client]] TOML
// for the variables it finds.
func runDiscover(args []string) error {
	fs := flag.NewFlagSet("discover", flag.ContinueOnError)
	path := fs.String("path", "", "browse path below Objects to start from, browse names separated by '/' (Plant/Line1)")
	name := fs.String("name", "", "station name, also the first segment of the tag names (default: the server's host)")
	policy := fs.String("security-policy", config.OPCUAPolicyNone, "None or Basic256Sha256")
	mode := fs.String("security-mode", config.OPCUAModeNone, "None, Sign or SignAndEncrypt")
	cert := fs.String("certificate", "", "Pith's application certificate (pith cert), with Basic256Sha256")
	key := fs.String("private-key", "", "its private key")
	trustDir := fs.String("trust-dir", "", "directory of trusted server certificates, with Basic256Sha256")
	insecure := fs.Bool("insecure-trust-any-server", false, "accept any server certificate")
	user := fs.String("username", "", "user name (with Basic256Sha256)")
	pass := fs.String("password", "", "password")
	maxVars := fs.Int("max", 10000, "stop after this many variables")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith discover opcua://host:port[/path] [flags]\n\n"+
			"Browses the server's address space (Objects, or --path below it) and prints an [[opcua.client]]\nsection with a tag for every Boolean, integer, Float, Double and String variable, arrays as count;\nthe others are listed as comments. `pith check-config` accepts the output as it is.\n\n")
		fs.PrintDefaults()
	}
	var endpoint string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		endpoint, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if endpoint == "" && fs.NArg() == 1 {
		endpoint = fs.Arg(0)
	} else if fs.NArg() != 0 || endpoint == "" {
		fs.Usage()
		return errors.New("want one endpoint, such as opcua://192.168.1.10:4840")
	}
	c := config.DefaultOPCUAClient()
	c.Endpoint = opcuaEndpoint(endpoint)
	c.Name = *name
	if c.Name == "" {
		c.Name = stationFromEndpoint(c.Endpoint)
	}
	c.SecurityPolicy, c.SecurityMode = *policy, *mode
	c.Certificate, c.PrivateKey, c.TrustDir, c.InsecureTrustAnyServer = *cert, *key, *trustDir, *insecure
	if *user != "" {
		c.Auth, c.Username, c.Password = config.OPCUAAuthUsername, *user, *pass
	}
	// The station is checked as a file would be, with a placeholder tag,
	// so that a wrong flag is named before any connection.
	check := c
	check.Tags = []config.OPCUATagSpec{{Name: c.Name + ".x", Node: "i=2258", Type: "Double", Count: 1, Mode: "subscribe",
		QueueSize: 1, ServerDeadband: "none", Scale: 1, Archive: "change", SamplingInterval: c.PublishInterval}}
	cfg := config.Default()
	cfg.OPCUA.Clients = []config.OPCUAClient{check}
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o := opcua.DefaultDiscoverOptions()
	o.Path, o.MaxVariables = *path, *maxVars
	found, err := opcua.Discover(ctx, c, o)
	if err != nil {
		return err
	}
	tags := 0
	for _, f := range found {
		if f.Skip == "" {
			tags++
		}
	}
	if tags == 0 {
		return fmt.Errorf("no numeric variables found below %q (%d variables in all)", "Objects/"+*path, len(found))
	}
	fmt.Fprintf(os.Stdout, "# pith discover %s: %d variables, %d as tags.\n", endpoint, len(found), tags)
	return opcua.WriteTOML(io.Writer(os.Stdout), c, found)
}

// stationFromEndpoint makes a station name from the endpoint's host.
func stationFromEndpoint(endpoint string) string {
	h := strings.TrimPrefix(endpoint, "opc.tcp://")
	if i := strings.IndexAny(h, ":/"); i >= 0 {
		h = h[:i]
	}
	var b strings.Builder
	for _, r := range h {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "opcua"
	}
	return b.String()
}
