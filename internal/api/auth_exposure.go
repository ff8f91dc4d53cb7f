package api

import (
	"fmt"
	"net"

	"github.com/pith-historian/pith/internal/netaddr"
)

// CheckExposure refuses a listen address that other machines can reach
// unless API keys are configured (haveKeys) or the config says auth =
// "none" explicitly (authNone). `pith serve` calls it before listening, so
// a box put on a network is never open by accident. Loopback addresses
// (127.0.0.0/8, ::1, "localhost") are always allowed. A host name other
// than localhost counts as exposed: what it resolves to may change.
func CheckExposure(addr string, haveKeys, authNone bool) error {
	if haveKeys || authNone {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("check listen address %q: %w", addr, err)
	}
	if netaddr.IsLoopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "all interfaces"
	}
	return fmt.Errorf("refuse to listen on %s (%s) without API keys or accounts: add keys to [[http.keys]], "+
		"an admin with `pith user add NAME --role admin`, listen on 127.0.0.1, or write auth = \"none\" to serve anyone who can reach it", addr, shown)
}
