package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/pith-historian/pith/internal/api"
)

func runKey(args []string) error {
	fs := flag.NewFlagSet("key", flag.ContinueOnError)
	scope := fs.String("scope", "write", "read, write or admin")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith key [--scope read|write|admin] NAME\n\nPrints a new API key once, and the [[http.keys]] entry (its hash) for the config.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want a key NAME")
	}
	if _, err := api.ParseScope(*scope); err != nil {
		return err
	}
	plain, hash := api.GenerateKey()
	fmt.Printf("# Key %q: give it to the client, it is not shown again.\n# Authorization: Bearer %s\n\n[[http.keys]]\nname = %q\nhash = %q\nscope = %q\n", fs.Arg(0), plain, fs.Arg(0), hash, *scope)
	return nil
}
