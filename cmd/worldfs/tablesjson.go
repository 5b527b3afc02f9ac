package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// tablesExample is the shape of world create's --tables (the root ctl's
// create takes the same), for the errors that say what was expected.
const tablesExample = `[{"name": "agent", "components": [{"name": "pos", "fields": [{"name": "x", "type": "double"}]}]}]`

// shape is what a JSON value of --tables must be: an array of elem, an
// object of keys, or a string.
type shape struct {
	what string // its name in a message: "a table", "a field"
	kind byte   // '[', '{', 's' or 'b' (a boolean)
	elem *shape
	keys map[string]*shape
}

var tablesShape = func() *shape {
	str := &shape{what: "a string", kind: 's'}
	field := &shape{what: "a field", kind: '{', keys: map[string]*shape{"name": str, "type": str}}
	comp := &shape{what: "a component", kind: '{', keys: map[string]*shape{"name": str, "fields": {what: "the fields", kind: '[', elem: field}}}
	table := &shape{what: "a table", kind: '{', keys: map[string]*shape{"name": str, "components": {what: "the components", kind: '[', elem: comp},
		"fact": {what: "a boolean", kind: 'b'}}}
	return &shape{what: "the tables", kind: '[', elem: table}
}()

// readTablesFlag returns the JSON --tables gives (the text itself, or
// @FILE's), checked for the shape of tables: an error names where (the
// file, a line and a column) and what was expected there. Names and types
// are the create command's to check.
func readTablesFlag(value string) ([]byte, error) {
	spec, from := []byte(value), "--tables"
	if name, ok := strings.CutPrefix(value, "@"); ok {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, usagef("--tables @%s: %v", name, err)
		}
		spec, from = data, "--tables @"+name
	} else if t := strings.TrimSpace(value); !strings.HasPrefix(t, "[") && !strings.HasPrefix(t, "{") && !json.Valid(spec) {
		if _, err := os.Stat(t); err == nil {
			return nil, usagef("--tables %s: that is a file's name; to read the tables from it, write --tables @%s", t, t)
		}
		return nil, usagef("--tables takes the tables as a JSON array (%s), or @FILE to read them from a file; %q is neither", tablesExample, value)
	}
	return spec, checkTablesJSON(spec, from)
}

// tablesChecker walks --tables token by token, so that each error has
// its place.
type tablesChecker struct {
	data []byte
	from string
	dec  *json.Decoder
}

// checkTablesJSON checks that spec is one JSON value of tablesShape.
func checkTablesJSON(spec []byte, from string) error {
	c := &tablesChecker{data: spec, from: from, dec: json.NewDecoder(bytes.NewReader(spec))}
	if err := c.walk(tablesShape, "the tables"); err != nil {
		return err
	}
	start := c.next()
	if _, err := c.dec.Token(); !errors.Is(err, io.EOF) {
		return usagef("%s: more follows the array of tables (one array holds them all)", c.at(start))
	}
	return nil
}

// walk reads one value of shape s, called label in messages.
func (c *tablesChecker) walk(s *shape, label string) error {
	start := c.next()
	tok, err := c.dec.Token()
	if err != nil {
		return c.syntax(err)
	}
	if got := tokenKind(tok); got != s.kind {
		if s == tablesShape {
			what := kindName(tok)
			if m := map[string]json.RawMessage{}; got == '{' && json.Unmarshal(c.data, &m) == nil && m["tables"] != nil {
				what += `; its "tables" is the array to give`
			}
			return usagef("%s: the tables are a JSON array (%s); this is %s", c.at(start), tablesExample, what)
		}
		return usagef("%s: %s is %s, not %s (the tables: %s)", c.at(start), label, kindWord(s.kind), kindName(tok), tablesExample)
	}
	switch s.kind {
	case '[':
		for c.dec.More() {
			if err := c.walk(s.elem, s.elem.what); err != nil {
				return err
			}
		}
	case '{':
		for c.dec.More() {
			kstart := c.next()
			k, err := c.dec.Token()
			if err != nil {
				return c.syntax(err)
			}
			key, _ := k.(string)
			child, ok := s.keys[key]
			if !ok {
				var known []string
				for name := range s.keys {
					known = append(known, name)
				}
				return usagef("%s: %s has no key %q%s %s has %s", c.at(kstart), s.what, key, orStop(key, known), upper(s.what), quotedAll(known))
			}
			if err := c.walk(child, fmt.Sprintf("the %q of %s", key, s.what)); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	if _, err := c.dec.Token(); err != nil { // the closing bracket or brace
		return c.syntax(err)
	}
	return nil
}

// syntax is a syntax error of the JSON, placed.
func (c *tablesChecker) syntax(err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		// A Decoder's syntax error is at the offending byte.
		if comma, ok := trailingComma(c.data, syn.Offset); ok {
			return usagef("%s: a comma before a closing bracket (JSON allows none after the last element)", c.at(comma))
		}
		return usagef("%s: %s", c.at(syn.Offset), syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return usagef("%s: the JSON ends before it is complete (a bracket or a brace left open?)", c.at(int64(len(c.data))))
	}
	return usagef("%s: %v", c.from, err)
}

// next is the offset of the next token: past the white space, colon or
// comma after the last one read.
func (c *tablesChecker) next() int64 {
	off := c.dec.InputOffset()
	for off < int64(len(c.data)) && strings.IndexByte(" \t\r\n:,", c.data[off]) >= 0 {
		off++
	}
	return off
}

// at names the place of offset off: the flag or file, the line and the
// column (from 1, in bytes).
func (c *tablesChecker) at(off int64) string {
	off = max(0, min(off, int64(len(c.data))))
	before := c.data[:off]
	line := 1 + bytes.Count(before, []byte("\n"))
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("%s, line %d, column %d", c.from, line, col)
}

// trailingComma returns the offset of the comma before the closing
// bracket or brace at offset off of data, if there is one.
func trailingComma(data []byte, off int64) (int64, bool) {
	if off < 0 || off >= int64(len(data)) || (data[off] != ']' && data[off] != '}') {
		return 0, false
	}
	before := bytes.TrimRight(data[:off], " \t\r\n")
	if len(before) == 0 || before[len(before)-1] != ',' {
		return 0, false
	}
	return int64(len(before) - 1), true
}

func tokenKind(tok json.Token) byte {
	switch v := tok.(type) {
	case json.Delim:
		return byte(v)
	case string:
		return 's'
	case bool:
		return 'b'
	}
	return 0
}

func kindWord(k byte) string {
	switch k {
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 'b':
		return "true or false"
	}
	return "a string"
}

func kindName(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return kindWord(byte(v))
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("the number %v", tok)
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
