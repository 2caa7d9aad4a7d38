// Package gql parses a GraphQL request document (the query language of
// the October 2021 specification: operations, fragments, selections,
// arguments, variables, directives), enough for a proxy to see what a
// request asks for before it goes: which operations, which fields at
// their top, with which arguments, and every field below. It does not
// validate against a schema.
//
// It reads untrusted bytes: the document's size, depth and token count
// are bounded, and a malformed one is an error, never a panic (FuzzParse).
package gql

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits.
const (
	MaxBytes  = 256 << 10
	MaxDepth  = 64
	MaxTokens = 50_000
)

// ErrSyntax is wrapped by every error about the document's form.
var ErrSyntax = errors.New("GraphQL syntax")

// Document is a parsed request document.
type Document struct {
	Operations []*Operation
	Fragments  map[string]*Fragment
}

// Operation is a query, mutation or subscription.
type Operation struct {
	Type      string // "query", "mutation" or "subscription"
	Name      string
	Selection []Selection
}

// Fragment is a named fragment definition.
type Fragment struct {
	Name, On  string
	Selection []Selection
}

// Selection is a field, a fragment spread (Spread set) or an inline
// fragment (Inline set, with its Selection).
type Selection struct {
	Alias, Name string
	Args        map[string]Value
	Selection   []Selection
	Spread      string // a fragment spread's name
	Inline      bool   // an inline fragment (On its type condition, "" for none)
	On          string
}

// Value is an argument's value: a variable (Var set), a scalar (Scalar,
// Kind "int", "float", "string", "bool", "null", "enum"), a list or an
// object.
type Value struct {
	Var    string
	Kind   string
	Scalar string
	List   []Value
	Object map[string]Value
}

// Resolve gives v with its variables replaced by vars' values (JSON as
// decoded into any); a variable not given is nil.
func (v Value) Resolve(vars map[string]any) any {
	switch {
	case v.Var != "":
		return vars[v.Var]
	case v.Kind == "list":
		out := make([]any, len(v.List))
		for i, x := range v.List {
			out[i] = x.Resolve(vars)
		}
		return out
	case v.Kind == "object":
		out := map[string]any{}
		for k, x := range v.Object {
			out[k] = x.Resolve(vars)
		}
		return out
	case v.Kind == "null":
		return nil
	case v.Kind == "bool":
		return v.Scalar == "true"
	case v.Kind == "int" || v.Kind == "float":
		f, _ := strconv.ParseFloat(v.Scalar, 64)
		return f
	}
	return v.Scalar
}

type token struct {
	kind byte // 'n' name, 'i' int, 'f' float, 's' string, 'p' punctuator, 0 end
	text string
}

type lexer struct {
	src  string
	pos  int
	toks []token
}

func isNameStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isNameCont(c byte) bool  { return isNameStart(c) || '0' <= c && c <= '9' }

func (l *lexer) errf(format string, a ...any) error {
	return fmt.Errorf("at byte %d: %s: %w", l.pos, fmt.Sprintf(format, a...), ErrSyntax)
}

func (l *lexer) lex() error {
	s := l.src
	for l.pos < len(s) {
		if len(l.toks) > MaxTokens {
			return l.errf("more than %d tokens", MaxTokens)
		}
		c := s[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			l.pos++
		case c == 0xEF && strings.HasPrefix(s[l.pos:], "\uFEFF"):
			l.pos += 3
		case c == '#':
			for l.pos < len(s) && s[l.pos] != '\n' && s[l.pos] != '\r' {
				l.pos++
			}
		case strings.HasPrefix(s[l.pos:], "..."):
			l.toks = append(l.toks, token{'p', "..."})
			l.pos += 3
		case strings.IndexByte("!$&()/:=@[]{|}", c) >= 0:
			if c == '/' {
				return l.errf("unexpected /")
			}
			l.toks = append(l.toks, token{'p', string(c)})
			l.pos++
		case isNameStart(c):
			st := l.pos
			for l.pos < len(s) && isNameCont(s[l.pos]) {
				l.pos++
			}
			l.toks = append(l.toks, token{'n', s[st:l.pos]})
		case c == '-' || '0' <= c && c <= '9':
			if err := l.number(); err != nil {
				return err
			}
		case c == '"':
			if err := l.str(); err != nil {
				return err
			}
		default:
			return l.errf("unexpected character %q", c)
		}
	}
	l.toks = append(l.toks, token{0, ""})
	return nil
}

func (l *lexer) number() error {
	s, st := l.src, l.pos
	if s[l.pos] == '-' {
		l.pos++
	}
	digits := func() int {
		n := 0
		for l.pos < len(s) && '0' <= s[l.pos] && s[l.pos] <= '9' {
			l.pos++
			n++
		}
		return n
	}
	if digits() == 0 {
		return l.errf("a number without digits")
	}
	kind := byte('i')
	if l.pos < len(s) && s[l.pos] == '.' {
		l.pos++
		kind = 'f'
		if digits() == 0 {
			return l.errf("a number without digits after .")
		}
	}
	if l.pos < len(s) && (s[l.pos] == 'e' || s[l.pos] == 'E') {
		l.pos++
		kind = 'f'
		if l.pos < len(s) && (s[l.pos] == '+' || s[l.pos] == '-') {
			l.pos++
		}
		if digits() == 0 {
			return l.errf("an exponent without digits")
		}
	}
	if l.pos < len(s) && (isNameStart(s[l.pos]) || s[l.pos] == '.') {
		return l.errf("a number run into a name")
	}
	l.toks = append(l.toks, token{kind, s[st:l.pos]})
	return nil
}

func (l *lexer) str() error {
	s := l.src
	if strings.HasPrefix(s[l.pos:], `"""`) {
		end := l.pos + 3
		for {
			i := strings.Index(s[end:], `"""`)
			if i < 0 {
				return l.errf("a block string without its end")
			}
			if i > 0 && s[end+i-1] == '\\' {
				end += i + 3
				continue
			}
			l.toks = append(l.toks, token{'s', strings.ReplaceAll(s[l.pos+3:end+i], `\"""`, `"""`)})
			l.pos = end + i + 3
			return nil
		}
	}
	var b strings.Builder
	l.pos++
	for {
		if l.pos >= len(s) || s[l.pos] == '\n' || s[l.pos] == '\r' {
			return l.errf("a string without its end")
		}
		c := s[l.pos]
		switch {
		case c == '"':
			l.pos++
			l.toks = append(l.toks, token{'s', b.String()})
			return nil
		case c == '\\':
			if l.pos+1 >= len(s) {
				return l.errf("a string without its end")
			}
			e := s[l.pos+1]
			l.pos += 2
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				if l.pos+4 > len(s) {
					return l.errf("a \\u escape cut short")
				}
				n, err := strconv.ParseUint(s[l.pos:l.pos+4], 16, 32)
				if err != nil {
					return l.errf("a bad \\u escape")
				}
				b.WriteRune(rune(n))
				l.pos += 4
			default:
				return l.errf("a bad escape \\%c", e)
			}
		default:
			r, n := utf8.DecodeRuneInString(s[l.pos:])
			if r == utf8.RuneError && n <= 1 {
				return l.errf("a string that is not UTF-8")
			}
			b.WriteString(s[l.pos : l.pos+n])
			l.pos += n
		}
	}
}

type parser struct {
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != 0 {
		p.i++
	}
	return t
}

func (p *parser) is(text string) bool {
	t := p.peek()
	return t.kind == 'p' && t.text == text
}

func (p *parser) errf(format string, a ...any) error {
	return fmt.Errorf("at token %d: %s: %w", p.i, fmt.Sprintf(format, a...), ErrSyntax)
}

func (p *parser) expect(text string) error {
	if !p.is(text) {
		return p.errf("want %q, have %q", text, p.peek().text)
	}
	p.next()
	return nil
}

func (p *parser) name() (string, error) {
	t := p.peek()
	if t.kind != 'n' {
		return "", p.errf("want a name, have %q", t.text)
	}
	p.next()
	return t.text, nil
}

// Parse reads a request document.
func Parse(src string) (*Document, error) {
	if len(src) > MaxBytes {
		return nil, fmt.Errorf("a document of %d bytes, over %d: %w", len(src), MaxBytes, ErrSyntax)
	}
	l := &lexer{src: src}
	if err := l.lex(); err != nil {
		return nil, err
	}
	p := &parser{toks: l.toks}
	d := &Document{Fragments: map[string]*Fragment{}}
	for p.peek().kind != 0 {
		t := p.peek()
		switch {
		case t.kind == 'p' && t.text == "{":
			sel, err := p.selectionSet()
			if err != nil {
				return nil, err
			}
			d.Operations = append(d.Operations, &Operation{Type: "query", Selection: sel})
		case t.kind == 'n' && (t.text == "query" || t.text == "mutation" || t.text == "subscription"):
			op, err := p.operation()
			if err != nil {
				return nil, err
			}
			d.Operations = append(d.Operations, op)
		case t.kind == 'n' && t.text == "fragment":
			f, err := p.fragment()
			if err != nil {
				return nil, err
			}
			if _, dup := d.Fragments[f.Name]; dup {
				return nil, p.errf("fragment %s defined twice", f.Name)
			}
			d.Fragments[f.Name] = f
		default:
			return nil, p.errf("want an operation or a fragment, have %q", t.text)
		}
	}
	if len(d.Operations) == 0 {
		return nil, fmt.Errorf("a document with no operation: %w", ErrSyntax)
	}
	return d, nil
}

func (p *parser) operation() (*Operation, error) {
	op := &Operation{Type: p.next().text}
	if p.peek().kind == 'n' {
		op.Name = p.next().text
	}
	if p.is("(") {
		if err := p.variableDefinitions(); err != nil {
			return nil, err
		}
	}
	if err := p.directives(); err != nil {
		return nil, err
	}
	sel, err := p.selectionSet()
	if err != nil {
		return nil, err
	}
	op.Selection = sel
	return op, nil
}

func (p *parser) fragment() (*Fragment, error) {
	p.next() // fragment
	f := &Fragment{}
	var err error
	if f.Name, err = p.name(); err != nil {
		return nil, err
	}
	if f.Name == "on" {
		return nil, p.errf("a fragment named on")
	}
	if t := p.next(); t.kind != 'n' || t.text != "on" {
		return nil, p.errf("want on, have %q", t.text)
	}
	if f.On, err = p.name(); err != nil {
		return nil, err
	}
	if err := p.directives(); err != nil {
		return nil, err
	}
	if f.Selection, err = p.selectionSet(); err != nil {
		return nil, err
	}
	return f, nil
}

func (p *parser) variableDefinitions() error {
	p.next() // (
	for !p.is(")") {
		if err := p.expect("$"); err != nil {
			return err
		}
		if _, err := p.name(); err != nil {
			return err
		}
		if err := p.expect(":"); err != nil {
			return err
		}
		if err := p.typeRef(0); err != nil {
			return err
		}
		if p.is("=") {
			p.next()
			if _, err := p.value(true); err != nil {
				return err
			}
		}
		if err := p.directives(); err != nil {
			return err
		}
	}
	p.next()
	return nil
}

func (p *parser) typeRef(depth int) error {
	if depth > MaxDepth {
		return p.errf("a type nested too deep")
	}
	if p.is("[") {
		p.next()
		if err := p.typeRef(depth + 1); err != nil {
			return err
		}
		if err := p.expect("]"); err != nil {
			return err
		}
	} else if _, err := p.name(); err != nil {
		return err
	}
	if p.is("!") {
		p.next()
	}
	return nil
}

func (p *parser) directives() error {
	for p.is("@") {
		p.next()
		if _, err := p.name(); err != nil {
			return err
		}
		if p.is("(") {
			if _, err := p.arguments(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *parser) selectionSet() ([]Selection, error) {
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	if p.depth++; p.depth > MaxDepth {
		return nil, p.errf("selections nested deeper than %d", MaxDepth)
	}
	defer func() { p.depth-- }()
	var out []Selection
	for !p.is("}") {
		if p.peek().kind == 0 {
			return nil, p.errf("a selection set without its end")
		}
		s, err := p.selection()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	p.next()
	if len(out) == 0 {
		return nil, p.errf("an empty selection set")
	}
	return out, nil
}

func (p *parser) selection() (Selection, error) {
	if p.is("...") {
		p.next()
		t := p.peek()
		if t.kind == 'n' && t.text != "on" {
			p.next()
			return Selection{Spread: t.text}, p.directives()
		}
		s := Selection{Inline: true}
		if t.kind == 'n' && t.text == "on" {
			p.next()
			var err error
			if s.On, err = p.name(); err != nil {
				return s, err
			}
		}
		if err := p.directives(); err != nil {
			return s, err
		}
		var err error
		s.Selection, err = p.selectionSet()
		return s, err
	}
	var s Selection
	var err error
	if s.Name, err = p.name(); err != nil {
		return s, err
	}
	if p.is(":") {
		p.next()
		s.Alias = s.Name
		if s.Name, err = p.name(); err != nil {
			return s, err
		}
	}
	if p.is("(") {
		if s.Args, err = p.arguments(); err != nil {
			return s, err
		}
	}
	if err := p.directives(); err != nil {
		return s, err
	}
	if p.is("{") {
		if s.Selection, err = p.selectionSet(); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (p *parser) arguments() (map[string]Value, error) {
	p.next() // (
	args := map[string]Value{}
	for !p.is(")") {
		n, err := p.name()
		if err != nil {
			return nil, err
		}
		if err := p.expect(":"); err != nil {
			return nil, err
		}
		v, err := p.value(false)
		if err != nil {
			return nil, err
		}
		if _, dup := args[n]; dup {
			return nil, p.errf("argument %s given twice", n)
		}
		args[n] = v
	}
	p.next()
	if len(args) == 0 {
		return nil, p.errf("empty arguments")
	}
	return args, nil
}

func (p *parser) value(constant bool) (Value, error) {
	if p.depth++; p.depth > MaxDepth {
		return Value{}, p.errf("a value nested deeper than %d", MaxDepth)
	}
	defer func() { p.depth-- }()
	t := p.next()
	switch {
	case t.kind == 'p' && t.text == "$" && !constant:
		n, err := p.name()
		return Value{Var: n}, err
	case t.kind == 'i':
		return Value{Kind: "int", Scalar: t.text}, nil
	case t.kind == 'f':
		return Value{Kind: "float", Scalar: t.text}, nil
	case t.kind == 's':
		return Value{Kind: "string", Scalar: t.text}, nil
	case t.kind == 'n':
		switch t.text {
		case "true", "false":
			return Value{Kind: "bool", Scalar: t.text}, nil
		case "null":
			return Value{Kind: "null"}, nil
		}
		return Value{Kind: "enum", Scalar: t.text}, nil
	case t.kind == 'p' && t.text == "[":
		v := Value{Kind: "list"}
		for !p.is("]") {
			if p.peek().kind == 0 {
				return v, p.errf("a list without its end")
			}
			x, err := p.value(constant)
			if err != nil {
				return v, err
			}
			v.List = append(v.List, x)
		}
		p.next()
		return v, nil
	case t.kind == 'p' && t.text == "{":
		v := Value{Kind: "object", Object: map[string]Value{}}
		for !p.is("}") {
			n, err := p.name()
			if err != nil {
				return v, err
			}
			if err := p.expect(":"); err != nil {
				return v, err
			}
			x, err := p.value(constant)
			if err != nil {
				return v, err
			}
			if _, dup := v.Object[n]; dup {
				return v, p.errf("field %s given twice", n)
			}
			v.Object[n] = x
		}
		p.next()
		return v, nil
	}
	return Value{}, p.errf("want a value, have %q", t.text)
}

// Walk calls fn for every field of sel and below, fragments' included
// (each fragment once), with its depth (1 for sel's own fields).
func (d *Document) Walk(sel []Selection, fn func(s *Selection, depth int) error) error {
	seen := map[string]bool{}
	var walk func([]Selection, int) error
	walk = func(sel []Selection, depth int) error {
		for i := range sel {
			s := &sel[i]
			switch {
			case s.Spread != "":
				f := d.Fragments[s.Spread]
				if f == nil {
					return fmt.Errorf("fragment %s is not defined: %w", s.Spread, ErrSyntax)
				}
				if seen[s.Spread] {
					continue
				}
				seen[s.Spread] = true
				if err := walk(f.Selection, depth); err != nil {
					return err
				}
			case s.Inline:
				if err := walk(s.Selection, depth); err != nil {
					return err
				}
			default:
				if err := fn(s, depth); err != nil {
					return err
				}
				if err := walk(s.Selection, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(sel, 1)
}
