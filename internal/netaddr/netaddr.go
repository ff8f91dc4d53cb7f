// Package netaddr answers the question both the HTTP server and the
// configuration check ask of a listen address: can other machines reach
// it?
package netaddr

import (
	"net"
	"strings"
)

// IsLoopback reports whether host (an IP or "localhost", without port)
// is reachable from this machine only. An empty host (every interface)
// and any other host name are not: what a name resolves to may change.
func IsLoopback(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // a zone, as in fe80::1%eth0
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
