package users

import (
	"bufio"
	"fmt"
	"io"
	"slices"
)

// Limits of the group search.
const (
	maxLDAPGroups  = 1000 // entries read from one search
	ldapSearchSecs = 5    // the server's time limit of the search, seconds
)

// searchGroupsRequest encodes LDAPMessage{id, SearchRequest{base,
// wholeSubtree, neverDerefAliases, sizeLimit, timeLimit, typesOnly false,
// (|(member=dn)(uniqueMember=dn)), [cn]}}: the groups naming dn as a
// member, by their cn.
func searchGroupsRequest(id byte, base, dn string) []byte {
	eq := func(attr string) []byte {
		v := berTLV(nil, 0x04, []byte(attr))
		v = berTLV(v, 0x04, []byte(dn))
		return berTLV(nil, 0xa3, v) // [3] equalityMatch
	}
	filter := berTLV(nil, 0xa1, append(eq("member"), eq("uniqueMember")...)) // [1] or
	var op []byte
	op = berTLV(op, 0x04, []byte(base))
	op = berTLV(op, 0x0a, []byte{2}) // scope wholeSubtree
	op = berTLV(op, 0x0a, []byte{0}) // derefAliases never
	op = berTLV(op, 0x02, []byte{0x03, 0xe8})
	op = berTLV(op, 0x02, []byte{ldapSearchSecs})
	op = berTLV(op, 0x01, []byte{0}) // typesOnly false
	op = append(op, filter...)
	op = berTLV(op, 0x30, berTLV(nil, 0x04, []byte("cn")))
	msg := berTLV(nil, 0x02, []byte{id})
	msg = berTLV(msg, 0x63, op) // [APPLICATION 3] SearchRequest
	return berTLV(nil, 0x30, msg)
}

// readSearchGroups reads the answers to a group search (message id): the
// cn values of each SearchResultEntry until SearchResultDone, which must
// report success. References are skipped.
func readSearchGroups(r io.ByteReader, id byte) ([]string, error) {
	var cns []string
	for n := 0; ; n++ {
		if n > maxLDAPGroups {
			return nil, fmt.Errorf("ldap: more than %d groups", maxLDAPGroups)
		}
		tag, msg, err := readTLV(r, maxLDAPMessage)
		if err != nil {
			return nil, fmt.Errorf("ldap: read search answer: %w", err)
		}
		if tag != 0x30 {
			return nil, errDirectory
		}
		br := &byteReader{msg}
		tag, mid, err := readTLV(br, 8)
		if err != nil || tag != 0x02 || len(mid) != 1 || mid[0] != id {
			return nil, errDirectory
		}
		tag, op, err := readTLV(br, maxLDAPMessage)
		if err != nil {
			return nil, errDirectory
		}
		switch tag {
		case 0x64: // SearchResultEntry
			got, err := entryCNs(op)
			if err != nil {
				return nil, err
			}
			cns = append(cns, got...)
		case 0x73: // SearchResultReference: not followed
		case 0x65: // SearchResultDone
			_, rc, err := readTLV(&byteReader{op}, 8)
			if err != nil || len(rc) == 0 || len(rc) > 4 {
				return nil, errDirectory
			}
			code := 0
			for _, c := range rc {
				code = code<<8 | int(c)
			}
			if code != 0 {
				return nil, fmt.Errorf("ldap: group search refused with result code %d", code)
			}
			return cns, nil
		default:
			return nil, errDirectory
		}
	}
}

// entryCNs reads the cn values of SearchResultEntry{objectName,
// attributes SEQUENCE OF {type, vals SET OF value}}.
func entryCNs(op []byte) ([]string, error) {
	br := &byteReader{op}
	if tag, _, err := readTLV(br, maxLDAPMessage); err != nil || tag != 0x04 {
		return nil, errDirectory
	}
	tag, attrs, err := readTLV(br, maxLDAPMessage)
	if err != nil || tag != 0x30 {
		return nil, errDirectory
	}
	var out []string
	ar := &byteReader{attrs}
	for len(ar.b) > 0 {
		tag, pa, err := readTLV(ar, maxLDAPMessage)
		if err != nil || tag != 0x30 {
			return nil, errDirectory
		}
		pr := &byteReader{pa}
		tag, typ, err := readTLV(pr, 256)
		if err != nil || tag != 0x04 {
			return nil, errDirectory
		}
		tag, vals, err := readTLV(pr, maxLDAPMessage)
		if err != nil || tag != 0x31 {
			return nil, errDirectory
		}
		if !equalFold(string(typ), "cn") {
			continue
		}
		vr := &byteReader{vals}
		for len(vr.b) > 0 {
			tag, v, err := readTLV(vr, 1024)
			if err != nil || tag != 0x04 {
				return nil, errDirectory
			}
			out = append(out, string(v))
		}
	}
	return out, nil
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// groupRole returns the strongest role the groups map to, and whether any
// group is mapped.
func (l *LDAP) groupRole(cns []string) (Role, bool) {
	best := -1
	for _, cn := range cns {
		for g, r := range l.Groups {
			if equalFold(g, cn) {
				best = max(best, slices.Index(Roles, r))
			}
		}
	}
	if best < 0 {
		return "", false
	}
	return Roles[best], true
}

// searchGroups runs the group search on a connection bound as dn.
func (l *LDAP) searchGroups(rw io.ReadWriter, br *bufio.Reader, dn string) ([]string, error) {
	if _, err := rw.Write(searchGroupsRequest(2, l.GroupBase, dn)); err != nil {
		return nil, fmt.Errorf("ldap: %w", err)
	}
	return readSearchGroups(br, 2)
}
