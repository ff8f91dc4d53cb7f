package users

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/testpeer"
)

const ldapSuffix = "dc=pith,dc=test"

// startSlapd starts Debian's slapd on a free loopback port with a fresh
// database holding the people lena, max and nina (passwords "directory
// pass 1", 2 and 3) and the groups operators (lena, max), Plant Engineers
// (max, a groupOfUniqueNames) and visitors (nina), and returns its URL. It skips when slapd is not installed.
func startSlapd(t *testing.T) string {
	t.Helper()
	slapd, slapadd := "/usr/sbin/slapd", "/usr/sbin/slapadd"
	for _, p := range []string{slapd, slapadd, "/etc/ldap/schema/inetorgperson.schema"} {
		if _, err := os.Stat(p); err != nil {
			testpeer.Missing(t, "%s not found: apt-get install slapd to run the LDAP test", p)
		}
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "db"), 0o700)
	conf := filepath.Join(dir, "slapd.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile %s/slapd.pid
database mdb
suffix "%s"
rootdn "cn=admin,%s"
rootpw not-used-by-the-test
directory %s/db
`, dir, ldapSuffix, ldapSuffix, dir)), 0o600)
	ldif := filepath.Join(dir, "add.ldif")
	os.WriteFile(ldif, []byte(`dn: dc=pith,dc=test
objectClass: dcObject
objectClass: organization
o: pith
dc: pith

dn: ou=people,dc=pith,dc=test
objectClass: organizationalUnit
ou: people

dn: uid=lena,ou=people,dc=pith,dc=test
objectClass: inetOrgPerson
uid: lena
cn: Lena
sn: Directory
userPassword: directory pass 1

dn: uid=max,ou=people,dc=pith,dc=test
objectClass: inetOrgPerson
uid: max
cn: Max
sn: Directory
userPassword: directory pass 2

dn: uid=nina,ou=people,dc=pith,dc=test
objectClass: inetOrgPerson
uid: nina
cn: Nina
sn: Directory
userPassword: directory pass 3

dn: ou=groups,dc=pith,dc=test
objectClass: organizationalUnit
ou: groups

dn: cn=operators,ou=groups,dc=pith,dc=test
objectClass: groupOfNames
cn: operators
member: uid=lena,ou=people,dc=pith,dc=test
member: uid=max,ou=people,dc=pith,dc=test

dn: cn=Plant Engineers,ou=groups,dc=pith,dc=test
objectClass: groupOfUniqueNames
cn: Plant Engineers
uniqueMember: uid=max,ou=people,dc=pith,dc=test

dn: cn=visitors,ou=groups,dc=pith,dc=test
objectClass: groupOfNames
cn: visitors
member: uid=nina,ou=people,dc=pith,dc=test
`), 0o600)
	if out, err := exec.Command(slapadd, "-f", conf, "-l", ldif).CombinedOutput(); err != nil {
		t.Fatalf("slapadd: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	url := "ldap://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, slapd, "-f", conf, "-h", url+"/", "-d", "0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start slapd: %v", err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatalf("slapd does not listen on %s:\n%s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLDAPBind signs in against a real slapd: the directory's password
// works, a wrong one, an empty one (an unauthenticated bind) and an
// unknown name do not; a local account keeps its own password.
func TestLDAPBind(t *testing.T) {
	url := startSlapd(t)
	l := &LDAP{URL: url, BindDN: "uid={name},ou=people," + ldapSuffix, Role: RoleOperator, Timeout: 5 * time.Second}
	for _, tt := range []struct {
		name, pw string
		ok       bool
	}{
		{"lena", "directory pass 1", true},
		{"lena", "directory pass 2", false},
		{"lena", "", false},
		{"nobody", "directory pass 1", false},
		{"lena,ou=x", "directory pass 1", false},
	} {
		ok, err := l.bind(context.Background(), tt.name, tt.pw)
		if err != nil || ok != tt.ok {
			t.Errorf("bind %q %q: %v %v, want %v", tt.name, tt.pw, ok, err, tt.ok)
		}
	}

	// Through the sign-in: lena gets the directory's role; a session
	// works like a local one.
	r := newRig(t, false)
	r.mgr.mu.Lock()
	o := *r.mgr.options()
	o.LDAP = l
	r.mgr.opts.Store(&o)
	r.mgr.mu.Unlock()
	c := r.client()
	resp := c.signIn("lena", "directory pass 1")
	if resp.StatusCode != 200 {
		t.Fatalf("directory sign-in: %s", resp.Status)
	}
	if got := c.post("/api/v1/alarms/ack"); got != 200 {
		t.Errorf("directory operator acks: %d", got)
	}
	if got := c.post("/api/v1/admin/x"); got != 403 {
		t.Errorf("directory operator reaches admin: %d", got)
	}
	_, body := c.do("GET", "/api/v1/session", "", nil)
	var a sessionAnswer
	json.Unmarshal([]byte(body), &a)
	if a.User != "lena" || a.Role != "operator" {
		t.Errorf("session %s", body)
	}
	if resp := r.client().signIn("lena", "wrong password!"); resp.StatusCode != 401 {
		t.Errorf("wrong directory password: %s", resp.Status)
	}
	// A local account is checked locally, not in the directory.
	if resp := r.client().signIn("otto", pw); resp.StatusCode != 200 {
		t.Errorf("local account with a directory: %s", resp.Status)
	}
}

// FuzzBindResponse: the reader of a directory's answer never panics.
func FuzzBindResponse(f *testing.F) {
	f.Add([]byte{0x30, 0x0c, 0x02, 0x01, 0x01, 0x61, 0x07, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00})
	f.Add([]byte{0x30, 0x84, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = readBindResponse(bytes.NewReader(b), 1)
	})
}

// TestLDAPGroups maps directory groups to roles against a real slapd: the
// strongest mapped group wins (max is in operators and Plant Engineers),
// group names match regardless of case, both member and uniqueMember
// count, and a person in no mapped group gets the directory's role.
func TestLDAPGroups(t *testing.T) {
	url := startSlapd(t)
	l := &LDAP{URL: url, BindDN: "uid={name},ou=people," + ldapSuffix, Role: RoleViewer, Timeout: 5 * time.Second,
		GroupBase: "ou=groups," + ldapSuffix, Groups: map[string]Role{"operators": RoleOperator, "plant engineers": RoleEngineer}}
	for _, tt := range []struct {
		name, pw string
		ok       bool
		role     Role
	}{
		{"lena", "directory pass 1", true, RoleOperator},
		{"max", "directory pass 2", true, RoleEngineer},
		{"nina", "directory pass 3", true, RoleViewer},
		{"max", "directory pass 1", false, ""},
	} {
		role, ok, err := l.signIn(context.Background(), tt.name, tt.pw)
		if err != nil || ok != tt.ok || (ok && role != tt.role) {
			t.Errorf("sign in %s: %q %v %v, want %q %v", tt.name, role, ok, err, tt.role, tt.ok)
		}
	}
	// Through the sign-in: max's session carries the engineer role.
	r := newRig(t, false)
	r.mgr.mu.Lock()
	o := *r.mgr.options()
	o.LDAP = l
	r.mgr.opts.Store(&o)
	r.mgr.mu.Unlock()
	c := r.client()
	if resp := c.signIn("max", "directory pass 2"); resp.StatusCode != 200 {
		t.Fatalf("directory sign-in: %s", resp.Status)
	}
	_, body := c.do("GET", "/api/v1/session", "", nil)
	var a sessionAnswer
	json.Unmarshal([]byte(body), &a)
	if a.User != "max" || a.Role != "engineer" {
		t.Errorf("session %s", body)
	}
	// A group base the directory does not hold fails the sign-in (the
	// role cannot be known).
	bad := *l
	bad.GroupBase = "ou=nowhere," + ldapSuffix
	if _, ok, err := bad.signIn(context.Background(), "lena", "directory pass 1"); ok || err == nil {
		t.Errorf("search under a missing base: ok %v, err %v", ok, err)
	}
}

func searchAnswer(id byte, code byte, cns ...string) []byte {
	var out []byte
	if len(cns) > 0 {
		var vals []byte
		for _, cn := range cns {
			vals = berTLV(vals, 0x04, []byte(cn))
		}
		entry := berTLV(nil, 0x04, []byte("cn=g,ou=groups"))
		entry = berTLV(entry, 0x30, berTLV(nil, 0x30, append(berTLV(nil, 0x04, []byte("CN")), berTLV(nil, 0x31, vals)...)))
		out = berTLV(out, 0x30, append(berTLV(nil, 0x02, []byte{id}), berTLV(nil, 0x64, entry)...))
	}
	return berTLV(out, 0x30, append(berTLV(nil, 0x02, []byte{id}), berTLV(nil, 0x65, append(berTLV(nil, 0x0a, []byte{code}), 0x04, 0, 0x04, 0))...))
}

func TestReadSearchGroups(t *testing.T) {
	got, err := readSearchGroups(bytes.NewReader(searchAnswer(2, 0, "operators", "ops")), 2)
	if err != nil || len(got) != 2 || got[0] != "operators" || got[1] != "ops" {
		t.Fatalf("got %q %v", got, err)
	}
	if _, err := readSearchGroups(bytes.NewReader(searchAnswer(2, 32)), 2); err == nil {
		t.Error("noSuchObject accepted")
	}
	if _, err := readSearchGroups(bytes.NewReader(searchAnswer(3, 0)), 2); err == nil {
		t.Error("another message id accepted")
	}
}

// FuzzSearchGroups: the reader of a directory's search answers never
// panics. Run: go test -run XXX -fuzz FuzzSearchGroups ./internal/users
func FuzzSearchGroups(f *testing.F) {
	f.Add(searchAnswer(2, 0, "operators"))
	f.Add(searchAnswer(2, 32))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = readSearchGroups(bytes.NewReader(b), 2)
	})
}
