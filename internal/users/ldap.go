package users

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"
)

// LDAP is sign-in through the plant's directory: a person without a local
// account signs in when an LDAP simple bind as BindDN (with {name}
// replaced by the account name) and the password succeeds, and gets Role,
// or, with Groups, the strongest role of the directory groups under
// GroupBase that name the person as a member (member or uniqueMember; the
// search runs bound as the person).
// Only the bind is spoken (RFC 4511 BindRequest and UnbindRequest), so no
// LDAP library is needed; names are limited to CheckName's characters, so
// none can change the DN's structure.
type LDAP struct {
	URL     string        // ldap://host:389 or ldaps://host:636
	BindDN  string        // e.g. "uid={name},ou=people,dc=example,dc=org"
	Role    Role          // role of directory users (in none of Groups, when set)
	Timeout time.Duration // for the whole bind
	// GroupBase is where groups are searched, e.g. "ou=groups,dc=example,dc=org".
	GroupBase string
	// Groups maps a group's cn to a role; empty: no group search.
	Groups map[string]Role
}

// errDirectory is a directory that did not answer as one.
var errDirectory = errors.New("ldap: bad answer")

// maxLDAPMessage bounds the bind response read.
const maxLDAPMessage = 64 << 10

// bind reports whether the directory accepts name and password. A refusal
// (invalidCredentials and the like) is false with no error; an error says
// the directory could not be asked.
func (l *LDAP) bind(ctx context.Context, name, password string) (bool, error) {
	_, ok, err := l.signIn(ctx, name, password)
	return ok, err
}

// signIn binds as name and returns the person's role: from the groups
// when Groups is set and one of them names the person, else Role.
func (l *LDAP) signIn(ctx context.Context, name, password string) (Role, bool, error) {
	if err := CheckName(name); err != nil || password == "" {
		// An empty password would be an "unauthenticated bind", which
		// directories accept without checking anything.
		return "", false, nil
	}
	ok, role, err := l.dial(ctx, name, password)
	return role, ok, err
}

func (l *LDAP) dial(ctx context.Context, name, password string) (bool, Role, error) {
	u, err := url.Parse(l.URL)
	if err != nil {
		return false, "", fmt.Errorf("ldap url: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	var d net.Dialer
	var conn net.Conn
	switch u.Scheme {
	case "ldap":
		conn, err = d.DialContext(ctx, "tcp", hostPort(u, "389"))
	case "ldaps":
		td := tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}}
		conn, err = td.DialContext(ctx, "tcp", hostPort(u, "636"))
	default:
		return false, "", fmt.Errorf("ldap url %q: want ldap:// or ldaps://", l.URL)
	}
	if err != nil {
		return false, "", fmt.Errorf("ldap: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	dn := strings.ReplaceAll(l.BindDN, "{name}", name)
	if _, err := conn.Write(bindRequest(1, dn, password)); err != nil {
		return false, "", fmt.Errorf("ldap: %w", err)
	}
	br := bufio.NewReader(conn)
	code, err := readBindResponse(br, 1)
	if err != nil {
		return false, "", err
	}
	role := l.Role
	if code == 0 && len(l.Groups) > 0 {
		cns, err := l.searchGroups(conn, br, dn)
		if err != nil {
			return false, "", err
		}
		if r, ok := l.groupRole(cns); ok {
			role = r
		}
	}
	conn.Write([]byte{0x30, 0x05, 0x02, 0x01, 0x03, 0x42, 0x00}) // UnbindRequest, message 3
	return code == 0, role, nil
}

func hostPort(u *url.URL, port string) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// berTLV appends a BER tag, definite length and value.
func berTLV(b []byte, tag byte, v []byte) []byte {
	b = append(b, tag)
	switch n := len(v); {
	case n < 0x80:
		b = append(b, byte(n))
	case n < 0x100:
		b = append(b, 0x81, byte(n))
	case n < 0x10000:
		b = append(b, 0x82, byte(n>>8), byte(n))
	default:
		b = append(b, 0x83, byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, v...)
}

// bindRequest encodes LDAPMessage{id, BindRequest{3, dn, simple password}}.
func bindRequest(id byte, dn, password string) []byte {
	var op []byte
	op = berTLV(op, 0x02, []byte{3})        // version
	op = berTLV(op, 0x04, []byte(dn))       // name
	op = berTLV(op, 0x80, []byte(password)) // simple [0]
	msg := berTLV(nil, 0x02, []byte{id})    // messageID
	msg = berTLV(msg, 0x60, op)             // [APPLICATION 0] BindRequest
	return berTLV(nil, 0x30, msg)           // LDAPMessage
}

// readTLV reads one BER element's tag and value.
func readTLV(r io.ByteReader, max int) (tag byte, v []byte, err error) {
	if tag, err = r.ReadByte(); err != nil {
		return 0, nil, err
	}
	l0, err := r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	n := int(l0)
	if l0&0x80 != 0 {
		k := int(l0 & 0x7f)
		if k == 0 || k > 3 {
			return 0, nil, errDirectory
		}
		n = 0
		for i := 0; i < k; i++ {
			c, err := r.ReadByte()
			if err != nil {
				return 0, nil, err
			}
			n = n<<8 | int(c)
		}
	}
	if n > max {
		return 0, nil, errDirectory
	}
	v = make([]byte, n)
	for i := range v {
		if v[i], err = r.ReadByte(); err != nil {
			return 0, nil, err
		}
	}
	return tag, v, nil
}

type byteReader struct {
	b []byte
}

func (r *byteReader) ReadByte() (byte, error) {
	if len(r.b) == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c, nil
}

// readBindResponse reads LDAPMessage{id, BindResponse{resultCode, ...}}
// and returns the result code (0 is success).
func readBindResponse(r io.ByteReader, id byte) (int, error) {
	tag, msg, err := readTLV(r, maxLDAPMessage)
	if err != nil {
		return 0, fmt.Errorf("ldap: read answer: %w", err)
	}
	if tag != 0x30 {
		return 0, errDirectory
	}
	br := &byteReader{msg}
	tag, mid, err := readTLV(br, 8)
	if err != nil || tag != 0x02 || len(mid) != 1 || mid[0] != id {
		return 0, errDirectory
	}
	tag, op, err := readTLV(br, maxLDAPMessage)
	if err != nil || tag != 0x61 {
		return 0, errDirectory
	}
	tag, rc, err := readTLV(&byteReader{op}, 8)
	if err != nil || tag != 0x0a || len(rc) == 0 || len(rc) > 4 {
		return 0, errDirectory
	}
	code := 0
	for _, c := range rc {
		code = code<<8 | int(c)
	}
	return code, nil
}
