package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/pith-historian/pith/internal/agent"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/process"
)

func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (TOML); built-in defaults when empty")
	data := fs.String("data", "", "data directory (overrides store.dir)")
	listen := fs.String("listen", "", "HTTP listen address (overrides http.listen)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith serve [--config FILE] [--data DIR] [--listen ADDR]\n\nRuns the historian. SIGTERM or SIGINT stops accepting, flushes and exits 0.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	cfg, err := config.LoadFor(*cfgPath, *data, *listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := agent.Options{Config: cfg, Logger: agent.NewLogger(cfg.Log.Level)}
	if *cfgPath != "" {
		opts.Load = func() (*config.Config, error) { return config.LoadFor(*cfgPath, *data, *listen) }
	}
	return agent.Run(ctx, opts)
}

// flagErr turns -h into a clean exit.
func flagErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	return err
}

func runCheckConfig(args []string) error {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith check-config FILE\n\nValidates a config file and exits 0 when it is good.\n")
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want one config file")
	}
	cfg, err := config.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	if err := process.Check(cfg.Calc); err != nil { // expressions and cycles
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	fmt.Printf("%s: ok\n", fs.Arg(0))
	return nil
}
