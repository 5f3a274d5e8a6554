package rules

import "strings"

// token is one word of a rule line.
type token struct {
	text   string // the word with quotes removed and escapes resolved
	col    int    // 1-based byte column of its first character
	quoted bool   // some part of it was quoted ("!" only negates unquoted)
}

// isNot reports whether t is the negation operator "!".
func (t token) isNot() bool { return t.text == "!" && !t.quoted }

// isSpace reports whether c separates tokens.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// lexLine splits one line into tokens, the way a shell (or iptables-restore)
// would: words separated by white space; "double quoted" text with backslash
// escapes; 'single quoted' text taken literally; adjacent quoted and unquoted
// parts form one word; a '#' at the start of a word starts a comment that runs
// to the end of the line. pos gives the file and line of errors.
func lexLine(line string, pos Pos) ([]token, *Error) {
	var toks []token
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i >= len(line) || line[i] == '#' {
			return toks, nil
		}
		start := i
		// The common word has no quotes: it is a substring of the line.
		for i < len(line) && !isSpace(line[i]) && line[i] != '\'' && line[i] != '"' {
			i++
		}
		if i == len(line) || isSpace(line[i]) {
			toks = append(toks, token{text: line[start:i], col: start + 1})
			continue
		}
		i = start
		quoted := false
		var b strings.Builder
		for i < len(line) && !isSpace(line[i]) {
			switch c := line[i]; c {
			case '\'':
				quoted = true
				end := strings.IndexByte(line[i+1:], '\'')
				if end < 0 {
					pos.Col = i + 1
					return nil, &Error{Pos: pos, Msg: "unterminated single quote",
						Hint: "close the quoted text with '"}
				}
				b.WriteString(line[i+1 : i+1+end])
				i += end + 2
			case '"':
				quoted = true
				open := i
				i++
				for {
					if i >= len(line) {
						pos.Col = open + 1
						return nil, &Error{Pos: pos, Msg: "unterminated double quote",
							Hint: `close the quoted text with "`}
					}
					c := line[i]
					if c == '"' {
						i++
						break
					}
					if c == '\\' && i+1 < len(line) {
						i++
						c = line[i]
					}
					b.WriteByte(c)
					i++
				}
			default:
				b.WriteByte(c)
				i++
			}
		}
		toks = append(toks, token{text: b.String(), col: start + 1, quoted: quoted})
	}
}

// quote returns s as a double-quoted word that lexLine reads back as s.
func quote(s string) string {
	return quoteWith(s, `"\`)
}

// saveString writes a rule's string argument (a comment, a log prefix) as
// iptables-save does (xtables_save_string): bare when it is letters,
// digits, '_' and '-' only, else between double quotes with ", \ and '
// escaped.
func saveString(s string) string {
	if s != "" && strings.Trim(s, "_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" {
		return s
	}
	return quoteWith(s, `"\'`)
}

// quoteWith puts s between double quotes, a backslash before each byte of
// esc.
func quoteWith(s, esc string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(esc, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}
