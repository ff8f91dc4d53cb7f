package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/users"
)

const userUsage = `Usage: pith user [--config FILE] [--data DIR] COMMAND ...

Manages the people who sign in to the dashboard (docs/security.md). The
accounts live in the data directory; a running Pith sees changes within a
second, and a changed role, password or state ends that person's sessions.

Commands:
  add NAME [--role ROLE]   a new account (viewer, operator, engineer, admin;
                           the first account must be an admin)
  passwd NAME              a new password
  role NAME ROLE           a new role
  disable NAME             no sign-in; open sessions end
  enable NAME              sign-in again
  list                     every account

The password is asked twice on a terminal, or read as the first line of
standard input otherwise (or of --password-file).

`

func runUser(args []string) error {
	fs := flag.NewFlagSet("user", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (TOML): gives the data directory")
	data := fs.String("data", "", "data directory (overrides store.dir)")
	role := fs.String("role", "viewer", "role of a new account")
	pwFile := fs.String("password-file", "", "read the password from this file's first line")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), userUsage)
		fs.PrintDefaults()
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return flagErr(err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) == 0 {
		fs.Usage()
		return errors.New("want a command")
	}
	cfg, err := config.LoadFor(*cfgPath, *data, "")
	if err != nil {
		return err
	}
	acc, err := users.OpenAccounts(cfg.Store.Dir)
	if err != nil {
		return err
	}
	want := func(n int, what string) error {
		if len(pos) != n {
			fs.Usage()
			return errors.New("want " + what)
		}
		return nil
	}
	password := func() (string, error) { return readPassword(*pwFile, os.Stdin, os.Stderr) }
	switch pos[0] {
	case "add":
		if err := want(2, "add NAME"); err != nil {
			return err
		}
		r, err := users.ParseRole(*role)
		if err != nil {
			return err
		}
		pw, err := password()
		if err != nil {
			return err
		}
		if err := acc.Add(pos[1], r, pw, false); err != nil {
			return err
		}
		fmt.Printf("account %q added with the role %s\n", pos[1], r)
	case "passwd":
		if err := want(2, "passwd NAME"); err != nil {
			return err
		}
		pw, err := password()
		if err != nil {
			return err
		}
		if _, err := acc.Update(pos[1], users.Change{Password: &pw}); err != nil {
			return err
		}
		fmt.Printf("password of %q changed; its sessions end\n", pos[1])
	case "role":
		if err := want(3, "role NAME ROLE"); err != nil {
			return err
		}
		r, err := users.ParseRole(pos[2])
		if err != nil {
			return err
		}
		if _, err := acc.Update(pos[1], users.Change{Role: &r}); err != nil {
			return err
		}
		fmt.Printf("%q is now %s\n", pos[1], r)
	case "disable", "enable":
		if err := want(2, pos[0]+" NAME"); err != nil {
			return err
		}
		dis := pos[0] == "disable"
		if _, err := acc.Update(pos[1], users.Change{Disabled: &dis}); err != nil {
			return err
		}
		fmt.Printf("%q %sd\n", pos[1], pos[0])
	case "list":
		if err := want(1, "list"); err != nil {
			return err
		}
		list, err := acc.List()
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tSTATE\tCHANGED")
		for _, a := range list {
			state := "enabled"
			if a.Disabled {
				state = "disabled"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Name, a.Role, state, time.UnixMilli(a.Changed).UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	default:
		fs.Usage()
		return fmt.Errorf("unknown command %q", pos[0])
	}
	return nil
}

// readPassword reads a password from file, or asks for it twice without
// echo when in is a terminal, or reads in's first line.
func readPassword(file string, in *os.File, prompt io.Writer) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		return strings.TrimSuffix(line, "\r"), users.CheckPassword(strings.TrimSuffix(line, "\r"))
	}
	fd := int(in.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		// Not a terminal: the first line.
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && line == "" {
			return "", errors.New("read password: standard input is empty")
		}
		pw := strings.TrimRight(line, "\r\n")
		return pw, users.CheckPassword(pw)
	}
	noEcho := *t
	noEcho.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &noEcho); err != nil {
		return "", fmt.Errorf("turn off echo: %w", err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, t)
	r := bufio.NewReader(in)
	ask := func(p string) (string, error) {
		fmt.Fprint(prompt, p)
		line, err := r.ReadString('\n')
		fmt.Fprintln(prompt)
		return strings.TrimRight(line, "\r\n"), err
	}
	pw, err := ask("Password: ")
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	if err := users.CheckPassword(pw); err != nil {
		return "", err
	}
	again, err := ask("Again: ")
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	if again != pw {
		return "", errors.New("the passwords differ")
	}
	return pw, nil
}
