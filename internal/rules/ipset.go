package rules

import (
	"net/netip"
	"strconv"
)

// SetCreate is a `create` line of `ipset save` output.
type SetCreate struct {
	Name string
	Kind SetKind
	Size int // maxelem; 0 when not given
	Pos  Pos // of the set name
}

// SetAdds are the elements a restore file adds to one set.
type SetAdds struct {
	Name  string
	Elems []netip.Prefix // in file order
	Pos   Pos            // of the set name on its first add line
}

// SetRestore is an `ipset save` file: the sets it creates and the elements
// it adds, each in file order (the adds grouped by set).
type SetRestore struct {
	Creates []SetCreate
	Adds    []SetAdds
}

// ParseIpsetSave parses `ipset save` output: `create NAME TYPE [family
// inet|inet6] [hashsize N] [maxelem N] [bucketsize N] [initval V]` and `add
// NAME ELEMENT` lines, '#' comments and blank lines. Types are hash:ip and
// hash:net; hashsize, bucketsize and initval tune ipset's hash tables and
// are ignored. Options that change what a set matches (timeout, nomatch,
// netmask, counters, ...) are refused. existing gives the kind of a set that
// exists already, for add lines naming a set the file does not create. It
// returns every error (an ErrorList at file:line:col).
func ParseIpsetSave(file string, src []byte, existing func(name string) (SetKind, bool)) (*SetRestore, error) {
	out := &SetRestore{}
	created := map[string]int{}  // name -> index in Creates
	adds := map[string]int{}     // name -> index in Adds
	refused := map[string]bool{} // sets whose create line is refused
	errs := lexLines(file, src, func(line int, toks []token) *Error {
		at := func(t token) Pos { return Pos{file, line, t.col} }
		bad := func(t token, msg, hint string) *Error { return &Error{Pos: at(t), Token: t.text, Msg: msg, Hint: hint} }
		cmd := toks[0]
		switch cmd.text {
		case "create", "-N":
			if len(toks) < 3 {
				return bad(cmd, "incomplete line", "want create NAME TYPE [family inet|inet6] [maxelem N]")
			}
			name := toks[1]
			if !ValidSetName(name.text) {
				return bad(name, "not a set name", SetNameHint)
			}
			if _, dup := created[name.text]; dup {
				return bad(name, "set created twice", "")
			}
			refused[name.text] = true // until the line is read whole
			typ, err := ParseSetType(toks[2].text)
			if err != nil {
				return bad(toks[2], "unsupported set type", "xdpfw sets are hash:ip (addresses) or hash:net (networks)")
			}
			c := SetCreate{Name: name.text, Pos: at(name), Kind: SetKind{Type: typ, Family: FamilyIPv4}}
			for i := 3; i < len(toks); i += 2 {
				opt := toks[i]
				switch opt.text {
				case "family", "hashsize", "maxelem", "bucketsize", "initval":
				case "timeout":
					return bad(opt, "unsupported set option: the set's elements expire (ipset removes each when its timeout runs out, "+
						"as fail2ban's and CrowdSec's bans do); an element of an xdpfw set stays until xdpfw set del removes it",
						"keep this set and the rules that match it in the kernel's ipset and iptables, "+
							"or make the set without timeout and add and delete its elements with xdpfw set add/del")
				default:
					return bad(opt, "unsupported set option",
						"xdpfw sets take family and maxelem (hashsize, bucketsize and initval are ignored)")
				}
				if i+1 == len(toks) {
					return bad(opt, "missing value", "")
				}
				v := toks[i+1]
				switch opt.text {
				case "family":
					if c.Kind.Family, err = ParseSetFamily(v.text); err != nil {
						return bad(v, "not a set family", "want inet or inet6")
					}
				case "maxelem":
					n, err := strconv.Atoi(v.text)
					if err != nil || n < 1 {
						return bad(v, "not a positive number", "")
					}
					c.Size = n
				}
			}
			delete(refused, c.Name)
			created[c.Name] = len(out.Creates)
			out.Creates = append(out.Creates, c)
		case "add", "-A":
			if len(toks) < 3 {
				return bad(cmd, "incomplete line", "want add NAME ELEMENT")
			}
			name, elem := toks[1], toks[2]
			var kind SetKind
			if i, ok := created[name.text]; ok {
				kind = out.Creates[i].Kind
			} else if k, ok := existing(name.text); ok {
				kind = k
			} else if refused[name.text] {
				return nil // its create line's error says why
			} else {
				return bad(name, "no such set", "create it first: a create line before its add lines, or xdpfw set create")
			}
			if len(toks) > 3 {
				return bad(toks[3], "per-element options are not supported",
					"xdpfw set elements have no timeout, nomatch, counters or comment")
			}
			p, ve := parseSetElem(elem.text, kind)
			if ve != nil {
				return elemErr(at(elem), ve)
			}
			i, ok := adds[name.text]
			if !ok {
				i = len(out.Adds)
				adds[name.text] = i
				out.Adds = append(out.Adds, SetAdds{Name: name.text, Pos: at(name)})
			}
			out.Adds[i].Elems = append(out.Adds[i].Elems, p)
		default:
			return bad(cmd, "not an ipset save line", "xdpfw set restore reads `ipset save` output: create and add lines")
		}
		return nil
	})
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}
