package opcua

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"github.com/pith-historian/pith/internal/config"
)

// DiscoverOptions bound a browse of a server's address space.
type DiscoverOptions struct {
	// Path is the browse path below the Objects folder to start from,
	// browse names separated by '/' ("Plant/Line1"); "" is Objects.
	Path string
	// MaxVariables stops the browse after this many variables.
	MaxVariables int
	// MaxDepth is how many levels below the start are browsed.
	MaxDepth int
}

// DefaultDiscoverOptions browses all of Objects, up to 10,000 variables
// and 10 levels.
func DefaultDiscoverOptions() DiscoverOptions {
	return DiscoverOptions{MaxVariables: 10000, MaxDepth: 10}
}

// Found is one variable a browse found.
type Found struct {
	Node   string // node id, string form
	Path   []string
	Type   config.OPCUAType // 0 when not a type Pith reads
	TypeID string           // the data type's node id, for the skipped
	Count  int              // array length, 1 for a scalar
	Skip   string           // why it is not a tag, "" when it is
}

// Discover browses the server of station c (its endpoint, security and
// identity; its tags are ignored) from the Objects folder or o.Path, and
// returns the variables found in browse order.
func Discover(ctx context.Context, c config.OPCUAClient, o DiscoverOptions) ([]Found, error) {
	cl, _, err := dial(ctx, c)
	if err != nil {
		return nil, err
	}
	defer closeClient(cl, c.Timeout.Std())
	start := ua.NewNumericNodeID(0, id.ObjectsFolder)
	var prefix []string
	if o.Path != "" {
		for _, name := range strings.Split(strings.Trim(o.Path, "/"), "/") {
			next, err := child(ctx, cl, start, name)
			if err != nil {
				return nil, fmt.Errorf("browse path %q: %w", o.Path, err)
			}
			start = next
			prefix = append(prefix, name)
		}
	}
	type node struct {
		id    *ua.NodeID
		path  []string
		depth int
	}
	var vars []Found
	var varIDs []*ua.NodeID
	seen := map[string]bool{start.String(): true}
	queue := []node{{id: start, path: prefix}}
	for len(queue) > 0 && len(vars) < o.MaxVariables {
		n := queue[0]
		queue = queue[1:]
		refs, err := browse(ctx, cl, n.id)
		if err != nil {
			return nil, fmt.Errorf("browse %s: %w", n.id, err)
		}
		for _, r := range refs {
			nid := r.NodeID.NodeID
			if seen[nid.String()] || r.BrowseName == nil {
				continue
			}
			seen[nid.String()] = true
			p := append(append([]string(nil), n.path...), r.BrowseName.Name)
			switch r.NodeClass {
			case ua.NodeClassVariable:
				if len(vars) < o.MaxVariables {
					vars = append(vars, Found{Node: nid.String(), Path: p})
					varIDs = append(varIDs, nid)
				}
			case ua.NodeClassObject:
				if n.depth+1 < o.MaxDepth {
					queue = append(queue, node{id: nid, path: p, depth: n.depth + 1})
				}
			}
		}
	}
	if err := describe(ctx, cl, varIDs, vars); err != nil {
		return nil, err
	}
	return vars, nil
}

// browse returns the forward hierarchical references of n to objects and
// variables, following continuation points.
func browse(ctx context.Context, cl *opcua.Client, n *ua.NodeID) ([]*ua.ReferenceDescription, error) {
	req := &ua.BrowseRequest{
		NodesToBrowse: []*ua.BrowseDescription{{
			NodeID:          n,
			BrowseDirection: ua.BrowseDirectionForward,
			ReferenceTypeID: ua.NewNumericNodeID(0, id.HierarchicalReferences),
			IncludeSubtypes: true,
			NodeClassMask:   uint32(ua.NodeClassObject | ua.NodeClassVariable),
			ResultMask:      uint32(ua.BrowseResultMaskAll),
		}},
	}
	res, err := cl.Browse(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(res.Results) != 1 {
		return nil, fmt.Errorf("%d browse results", len(res.Results))
	}
	r := res.Results[0]
	if r.StatusCode != ua.StatusOK {
		return nil, r.StatusCode
	}
	out := r.References
	for cp := r.ContinuationPoint; len(cp) > 0; {
		next, err := cl.BrowseNext(ctx, &ua.BrowseNextRequest{ContinuationPoints: [][]byte{cp}})
		if err != nil {
			return nil, err
		}
		if len(next.Results) != 1 || next.Results[0].StatusCode != ua.StatusOK {
			break
		}
		out = append(out, next.Results[0].References...)
		cp = next.Results[0].ContinuationPoint
	}
	return out, nil
}

// child returns the node below parent whose browse name is name.
func child(ctx context.Context, cl *opcua.Client, parent *ua.NodeID, name string) (*ua.NodeID, error) {
	refs, err := browse(ctx, cl, parent)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range refs {
		if r.BrowseName != nil && r.BrowseName.Name == name {
			return r.NodeID.NodeID, nil
		}
		if r.BrowseName != nil {
			names = append(names, r.BrowseName.Name)
		}
	}
	return nil, fmt.Errorf("no %q below %s (there are %s)", name, parent, strings.Join(names, ", "))
}

// describe reads the data type, value rank and array dimensions of the
// variables and fills in vars.
func describe(ctx context.Context, cl *opcua.Client, ids []*ua.NodeID, vars []Found) error {
	const perVar = 3
	for start := 0; start < len(ids); start += itemsPerCall / perVar {
		end := min(start+itemsPerCall/perVar, len(ids))
		req := &ua.ReadRequest{}
		for _, n := range ids[start:end] {
			req.NodesToRead = append(req.NodesToRead,
				&ua.ReadValueID{NodeID: n, AttributeID: ua.AttributeIDDataType},
				&ua.ReadValueID{NodeID: n, AttributeID: ua.AttributeIDValueRank},
				&ua.ReadValueID{NodeID: n, AttributeID: ua.AttributeIDArrayDimensions})
		}
		res, err := cl.Read(ctx, req)
		if err != nil {
			return fmt.Errorf("read data types: %w", err)
		}
		if len(res.Results) != perVar*(end-start) {
			return fmt.Errorf("read data types: %d results for %d", len(res.Results), perVar*(end-start))
		}
		for i := start; i < end; i++ {
			r := res.Results[perVar*(i-start):]
			describeOne(&vars[i], r[0], r[1], r[2])
		}
	}
	return nil
}

func describeOne(f *Found, dt, rank, dims *ua.DataValue) {
	f.Count = 1
	var typeID *ua.NodeID
	if dt != nil && dt.Value != nil {
		typeID, _ = dt.Value.Value().(*ua.NodeID)
	}
	if typeID == nil {
		f.Skip = "data type unreadable"
		return
	}
	f.TypeID = typeID.String()
	if typeID.Namespace() != 0 || typeID.IntID() < uint32(config.OPCUABoolean) || typeID.IntID() > uint32(config.OPCUAString) {
		f.Skip = whyNot(typeID)
		return
	}
	f.Type = config.OPCUAType(typeID.IntID())
	r := int32(-1)
	if rank != nil && rank.Value != nil {
		if v, ok := rank.Value.Value().(int32); ok {
			r = v
		}
	}
	switch {
	case r == -1: // scalar
	case r == 1:
		var n uint32
		if dims != nil && dims.Value != nil {
			if d, ok := dims.Value.Value().([]uint32); ok && len(d) == 1 {
				n = d[0]
			}
		}
		if n == 0 || n > 65536 {
			f.Skip = "array of unknown or too large length"
			return
		}
		f.Count = int(n)
	default:
		f.Skip = fmt.Sprintf("value rank %d (only scalars and one-dimensional arrays are read)", r)
	}
}

// whyNot explains why a variable of a data type is not read, for the
// comments discover writes.
func whyNot(typeID *ua.NodeID) string {
	if typeID.Namespace() == 0 {
		switch typeID.IntID() {
		case id.LocalizedText, id.ByteString, id.XMLElement:
			return "text other than String (only String variables become text tags)"
		case id.DateTime:
			return "a DateTime"
		}
	}
	return "data type " + typeID.String() + " is not one of the numbers or String Pith reads"
}

// WriteTOML writes c as a [[opcua.client]] section with one tag per
// variable found; the variables that are not tags are listed as comments
// saying why. Tag names are the station's name and the browse path,
// dotted.
func WriteTOML(w io.Writer, c config.OPCUAClient, found []Found) error {
	var b strings.Builder
	fmt.Fprintf(&b, "[[opcua.client]]\nname = %s\nendpoint = %s\n", quote(c.Name), quote(c.Endpoint))
	if c.SecurityPolicy != config.OPCUAPolicyNone {
		fmt.Fprintf(&b, "security_policy = %s\nsecurity_mode = %s\n", quote(c.SecurityPolicy), quote(c.SecurityMode))
		fmt.Fprintf(&b, "certificate = %s\nprivate_key = %s\n", quote(c.Certificate), quote(c.PrivateKey))
		if c.TrustDir != "" {
			fmt.Fprintf(&b, "trust_dir = %s\n", quote(c.TrustDir))
		}
		if c.InsecureTrustAnyServer {
			b.WriteString("insecure_trust_any_server = true\n")
		}
	}
	if c.Auth != config.OPCUAAuthAnonymous {
		fmt.Fprintf(&b, "auth = %s\n", quote(c.Auth))
		if c.Auth == config.OPCUAAuthUsername {
			fmt.Fprintf(&b, "username = %s\npassword = %s\n", quote(c.Username), quote(c.Password))
		}
		if c.Auth == config.OPCUAAuthCertificate && c.SecurityPolicy == config.OPCUAPolicyNone {
			fmt.Fprintf(&b, "certificate = %s\nprivate_key = %s\n", quote(c.Certificate), quote(c.PrivateKey))
		}
	}
	b.WriteString("tags = [\n")
	names := map[string]bool{}
	var skipped []string
	for _, f := range found {
		if f.Skip != "" {
			skipped = append(skipped, fmt.Sprintf("#   %s (%s): %s\n", f.Node, strings.Join(f.Path, "/"), f.Skip))
			continue
		}
		name := tagName(c.Name, f.Path)
		for base, i := name, 2; names[name]; i++ {
			name = base + "_" + strconv.Itoa(i)
		}
		names[name] = true
		fmt.Fprintf(&b, "  { name = %s, node = %s, type = %s", quote(name+map[bool]string{true: ".{i}"}[f.Count > 1]), quote(f.Node), quote(f.Type.String()))
		if f.Count > 1 {
			fmt.Fprintf(&b, ", count = %d", f.Count)
		}
		b.WriteString(" },\n")
	}
	b.WriteString("]\n")
	if len(skipped) > 0 {
		b.WriteString("# Variables left out:\n")
		for _, s := range skipped {
			b.WriteString(s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// tagName makes a tag name from a station name and a browse path: each
// segment keeps letters, digits, '_' and '-', other runs become '_'.
func tagName(station string, path []string) string {
	segs := []string{station}
	for _, p := range path {
		var b strings.Builder
		under := false
		for _, r := range p {
			if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' {
				b.WriteRune(r)
				under = false
			} else if !under {
				b.WriteByte('_')
				under = true
			}
		}
		if s := strings.Trim(b.String(), "_"); s != "" {
			segs = append(segs, s)
		}
	}
	return strings.Join(segs, ".")
}

// quote writes s as a TOML basic string.
func quote(s string) string { return strconv.Quote(s) }
